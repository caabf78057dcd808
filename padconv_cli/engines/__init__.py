"""Engines that run Pad and Conv beyond one machine's memory on an existing distributed engine.

``padconv_cli.engines.dask_engine`` runs them on a ``dask.distributed`` cluster (optional
extra ``padconv[dask]``): inputs and outputs as ``.npy`` files or Zarr stores, the output cut
into blocks computed by padconv's own kernels (see :mod:`padconv_cli.engines.dask_ops`).
Nothing here is imported unless ``--engine dask`` is used.
"""
