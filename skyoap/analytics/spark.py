"""The Spark session analysts' jobs run in: local by default (``local[2]``),
or a cluster by its master URL; the ``skyoap`` data source registered."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from skyoap.analytics.source import SkyoapDataSource

LOCAL = "local[2]"


def session(master: str = LOCAL, app: str = "skyoap") -> SparkSession:
    """A session on ``master`` (``local[2]``, ``spark://host:7077``, ``yarn``…).
    Workers run this interpreter locally; on a cluster they need Python
    3.11 with this project installed (``pip install skyoap``)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # The skyoap source has the storage run a read's filters (pushFilters).
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.sql.python.filterPushdown.enabled", "true")
    )
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(SkyoapDataSource)
    return spark
