"""Airflow DAG: a daily TrieHH discovery, `triehh discover` as the driver, jobs on Dataflow.

Copy this file to the DAGs folder (Cloud Composer: `gcloud composer environments storage dags
import --environment ENV --location REGION --source deploy/schedule/triehh_discover_dag.py`)
and set the Airflow Variables below. The task runs `triehh discover`, so triehh-beam must be
installed where the task runs (Composer: `gcloud composer environments update ENV --location
REGION --update-pypi-package triehh-beam==0.2.0.dev0` from your package index, or run the image with
a KubernetesPodOperator instead, same command line).

Why a Python task rather than Beam's operators: `triehh discover` is a driver that runs a census
job and one Dataflow job per round and commits state between them; BeamRunPythonPipelineOperator
expects one pipeline per task. Why not a BashOperator: exit code 2 (bad arguments, unusable input,
infeasible privacy target, a state directory of another job) must fail the task without retries,
exit code 1 must be retried; Airflow's AirflowFailException says exactly that.

Retries resume: the output and state directories are named after the run's logical date (`ds`),
so a retried or cleared task re-runs the same command and continues after the last committed
round, with the same seed.

Airflow Variables (Admin > Variables), with example values:
  triehh_project          my-project
  triehh_region           us-central1
  triehh_data_bucket      my-project-triehh-data
  triehh_private_bucket   my-project-triehh-private
  triehh_image            us-central1-docker.pkg.dev/my-project/triehh/triehh-beam:0.2.0.dev0
  triehh_service_account  triehh-discover@my-project.iam.gserviceaccount.com
"""

from __future__ import annotations

import datetime
import shlex
import subprocess

try:  # Airflow 3
    from airflow.sdk import DAG, Variable
except ImportError:  # Airflow 2.4+
    from airflow import DAG
    from airflow.models import Variable
try:
    from airflow.providers.standard.operators.python import PythonOperator
except ImportError:
    from airflow.operators.python import PythonOperator
from airflow.exceptions import AirflowException, AirflowFailException

EPSILON, DELTA, MAX_LENGTH = "4", "1e-10", "10"
# The population's lifetime budget, enforced against one ledger shared by every run.
BUDGET_EPSILON, BUDGET_DELTA = "120", "1e-8"


def discover_command(ds: str, v) -> list:
    """The `triehh discover` command line for the run of logical date ``ds`` (YYYY-MM-DD)."""
    data, private = v("triehh_data_bucket"), v("triehh_private_bucket")
    return [
        "triehh", "discover",
        "--input", f"gs://{data}/records/dt={ds}/*.parquet",
        "--output", f"gs://{data}/heavy-hitters/dt={ds}",
        "--state-dir", f"gs://{private}/state/dt={ds}",
        "--epsilon", EPSILON, "--delta", DELTA, "--max-length", MAX_LENGTH,
        "--ledger", f"gs://{private}/ledger/app-records",
        "--budget-epsilon", BUDGET_EPSILON, "--budget-delta", BUDGET_DELTA,
        "--runner=DataflowRunner",
        f"--project={v('triehh_project')}",
        f"--region={v('triehh_region')}",
        f"--temp_location=gs://{private}/dataflow/tmp",
        f"--staging_location=gs://{private}/dataflow/staging",
        f"--service_account_email={v('triehh_service_account')}",
        f"--sdk_container_image={v('triehh_image')}",
        f"--labels=triehh_run={ds}",
    ]


def run_discover(ds: str, **_context) -> None:
    command = discover_command(ds, Variable.get)
    print("running:", shlex.join(command), flush=True)
    code = subprocess.run(command).returncode  # output goes to the task log
    if code == 2:
        raise AirflowFailException("triehh discover refused the run (exit code 2); not retrying")
    if code != 0:
        raise AirflowException(f"triehh discover failed (exit code {code}); a retry resumes the run")


with DAG(
    dag_id="triehh_discover_daily",
    description="Private heavy-hitter discovery (TrieHH) over the day's records, on Dataflow",
    schedule="0 3 * * *",
    start_date=datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args={
        "retries": 3,
        "retry_delay": datetime.timedelta(minutes=10),
        "execution_timeout": datetime.timedelta(hours=12),
    },
    tags=["triehh", "privacy", "dataflow"],
) as dag:
    PythonOperator(task_id="discover", python_callable=run_discover)
