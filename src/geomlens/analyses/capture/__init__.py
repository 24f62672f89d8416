"""What a capture alone reports: the variance shares of both views of position 0 (the
``geomlens capture`` command itself is ``commands/capture.py``)."""
