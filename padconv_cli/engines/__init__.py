"""Engines that run Pad and Conv on a dask cluster (the optional extra ``padconv[dask]``)."""
