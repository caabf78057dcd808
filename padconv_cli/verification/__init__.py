"""``padconv verify``: replay documented examples and ONNX conformance cases through padconv.

* :mod:`.cases` — the Case record and the built-in cases (``data/*.json``).
* :mod:`.onnx_suite` — cases from ONNX backend-test folders and the installed onnx package.
* :mod:`.compare` — the comparison rule (:func:`compare_arrays`).
* :mod:`.runner` — running a case through :mod:`padconv_cli.onnx_nodes` and the kernels.
* :mod:`.report` — table, JSON lines and JUnit XML renderings of the results.
"""
