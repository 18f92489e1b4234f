"""What the query port serves for user interfaces: the menu and dashboards
SkyWalking's UI draws (``dashboards.py``, from each layer's), as users
changed them (``templates.py``), and skyoap's own web UI (``files.py``,
its files in ``static/``)."""
