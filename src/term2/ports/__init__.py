"""The interfaces the use cases need from the outside world, as small Protocols."""
