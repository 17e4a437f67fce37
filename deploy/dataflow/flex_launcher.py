"""Dataflow Flex Template entry point: runs ``triehh discover`` (the multi-job driver) on the
Flex Template launcher VM.

How Dataflow's Python Flex Template launcher calls this file (``FLEX_TEMPLATE_PYTHON_PY_FILE``)::

    python /template/flex_launcher.py --input=gs://... --output=gs://... --epsilon=4 ...  (template parameters)
        --runner=DataflowRunner --project=P --region=R --staging_location=gs://... --temp_location=gs://...
        --template_location=gs://<staging>/template_launches/<launch job id>/job_object
        --job_name=<launch job name> [--labels=... --sdk_container_image=... --service_account_email=...]

The launcher expects the program to write ONE job description to ``--template_location``; the
service then starts that job under the launch's job id. ``triehh discover`` cannot work that
way: it runs a census job and then one job per round, and each job needs the previous one's
output. So this wrapper:

  1. maps the template parameters (Flex parameter names cannot contain "-") to ``triehh
     discover`` flags (``max_length`` -> ``--max-length``, ...);
  2. removes ``--template_location`` and ``--job_name`` from the Beam options the jobs get, so
     every job (census, round 1, round 2, ...) is submitted directly, awaited, and gets its own
     default name (Dataflow refuses a second active job with the launch's name);
  3. defaults ``--sdk_container_image`` to ``$TRIEHH_SDK_CONTAINER_IMAGE`` (baked into the image
     at build time), so the workers run the same image as the launcher;
  4. runs the discovery in this process (exit code 2: bad arguments, unusable input, infeasible
     privacy target or a state directory of another job; 1: a failure while running);
  5. on success, and unless ``marker_job=false``, writes a one-step "marker" job to the
     ``--template_location`` it removed, so that the launch itself completes: the launch's own
     Dataflow job logs where the results are and ends. Without it the launch is reported as
     failed (no job object) even though the discovery jobs succeeded.

The launcher VM lives for the whole discovery (census + up to L rounds, each a Dataflow job
with its own worker start-up). If that does not suit you, run the same image as a Kubernetes
Job, a Cloud Run job or an Airflow task instead (``deploy/schedule/``).

Needs only the standard library to translate arguments; ``triehh_beam`` and Beam are imported
when the discovery runs.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Dict, List, Optional, Sequence, Tuple

# Flex Template parameter -> `triehh discover` flag taking a value.
VALUE_PARAMETERS = {
    "input": "--input",
    "output": "--output",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "max_length": "--max-length",
    "unit_size": "--unit-size",
    "state_dir": "--state-dir",
    "rule": "--rule",
    "format": "--format",
    "user_column": "--user-column",
    "item_column": "--item-column",
    "count_column": "--count-column",
    "seed_file": "--seed-file",
    "ledger": "--ledger",
    "budget_epsilon": "--budget-epsilon",
    "budget_delta": "--budget-delta",
    "rounds_per_job": "--rounds-per-job",
    "estimate_frequencies": "--estimate-frequencies",
}
# Flex Template parameter ("true"/"false") -> `triehh discover` switch.
SWITCH_PARAMETERS = {
    "case_fold": "--case-fold",
    "truncate_long_items": "--truncate-long-items",
    "keep_samples": "--keep-samples",
}
# Parameters of this wrapper itself.
WRAPPER_PARAMETERS = {"marker_job"}
# Beam options the launcher sets for the single job it expects; removed from the jobs' options.
LAUNCH_ONLY_OPTIONS = ("template_location", "job_name")
IMAGE_ENVIRONMENT_VARIABLE = "TRIEHH_SDK_CONTAINER_IMAGE"

_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no", ""}


def _split(argv: Sequence[str]) -> List[Tuple[str, Optional[str], str]]:
    """[(name, value or None, original text)] for ``--name=value``, ``--name value``, ``--flag``."""
    items, i = [], 0
    argv = list(argv)
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--"):
            raise ValueError(f"unexpected argument {arg!r}: the launcher passes --name=value")
        name, eq, value = arg[2:].partition("=")
        if eq:
            items.append((name, value, arg))
        elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            i += 1
            items.append((name, argv[i], f"--{name}={argv[i]}"))
        else:
            items.append((name, None, arg))
        i += 1
    return items


def translate(argv: Sequence[str], environ: Optional[Dict[str, str]] = None):
    """Splits the launcher's arguments.

    Returns:
      (discover_args, beam_args, launch_options, wrapper_options): the ``triehh discover`` flags,
      the Beam options every job gets, the launch-only options removed from them
      (``template_location``, ``job_name``), and this wrapper's own parameters.
    """
    environ = os.environ if environ is None else environ
    discover_args: List[str] = []
    beam_args: List[str] = []
    launch: Dict[str, str] = {}
    wrapper: Dict[str, str] = {}
    for name, value, text in _split(argv):
        if name in VALUE_PARAMETERS:
            if value is None:
                raise ValueError(f"template parameter {name} needs a value")
            discover_args += [VALUE_PARAMETERS[name], value]
        elif name in SWITCH_PARAMETERS:
            flag = (value or "true").strip().lower()
            if flag not in _TRUE | _FALSE:
                raise ValueError(f"template parameter {name} is true or false, got {value!r}")
            if flag in _TRUE:
                discover_args.append(SWITCH_PARAMETERS[name])
        elif name in WRAPPER_PARAMETERS:
            wrapper[name] = value or "true"
        elif name in LAUNCH_ONLY_OPTIONS:
            launch[name] = value or ""
        else:
            beam_args.append(text)
    image = environ.get(IMAGE_ENVIRONMENT_VARIABLE)
    if image and not any(a.startswith("--sdk_container_image") for a in beam_args):
        beam_args.append(f"--sdk_container_image={image}")
    return discover_args, beam_args, launch, wrapper


def build_marker_pipeline(beam_args: Sequence[str], launch: Dict[str, str], message: str):
    """The one-step job written to the launch's ``--template_location`` after a discovery."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    options = list(beam_args) + [f"--{name}={value}" for name, value in launch.items() if value]
    pipeline = beam.Pipeline(options=PipelineOptions(options))
    _ = pipeline | "Result" >> beam.Create([message]) | "Log" >> beam.Map(logging.warning)
    return pipeline


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO)
    argv = sys.argv[1:] if argv is None else argv
    try:
        discover_args, beam_args, launch, wrapper = translate(argv)
    except ValueError as e:
        print(f"flex_launcher: error: {e}", file=sys.stderr)
        return 2
    from triehh_beam import cli

    logging.info("running: triehh discover %s %s", " ".join(discover_args), " ".join(beam_args))
    code = cli.main(["discover", *discover_args, *beam_args])
    if code != 0:
        return code
    marker = wrapper.get("marker_job", "true").strip().lower() not in _FALSE
    if marker and launch.get("template_location"):
        output = discover_args[discover_args.index("--output") + 1]
        build_marker_pipeline(
            beam_args, launch, f"triehh discover finished; results in {output.rstrip('/')}/heavy_hitters.json"
        ).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
