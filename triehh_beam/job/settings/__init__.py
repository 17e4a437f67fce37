"""What a job is asked to do, before it runs: every setting declared once, the validated
configuration, the job's identity and keys, where its records come from (pinned), and the deny
lists of earlier releases. Imports ``state``."""
