"""What ``skyoap spark`` says when a job fails inside Spark."""

from __future__ import annotations

from skyoap.deploy.cli import python_error

REPORT = """[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform \
latestOffset: Traceback (most recent call last):
  File "/work/main/analytics/source.py", line 171, in _bounds
    raise ValueError(f"topic {topic} has no partitions yet: no node has installed it")
ValueError: topic metrics has no partitions yet: no node has installed it
 SQLSTATE: 38000
\tat org.apache.spark.sql.execution.datasources.v2.python.PythonStreamingSourceRunner.latestOffset"""


def test_the_python_error_is_picked_out_of_spark_s_report() -> None:
    assert python_error(REPORT) == "ValueError: topic metrics has no partitions yet: no node has installed it"


def test_a_report_without_one_gives_its_first_line() -> None:
    assert python_error("[INTERNAL_ERROR] something broke\nmore") == "[INTERNAL_ERROR] something broke"
