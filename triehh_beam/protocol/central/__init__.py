"""The protocols that need the records on the server: whole-item sample-and-threshold, optimal
partition selection and noisy prefix rounds, each as its plan and its keyed release. Imports every
room below it."""
