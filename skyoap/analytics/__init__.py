"""What analysts use: the Spark data source over what the pipeline persisted
(``analytics/source.py``) and the jobs built on it (``analytics/jobs.py``)."""
