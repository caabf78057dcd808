"""Build of padconv's native Conv extension (everything else is in pyproject.toml).

The extension is plain C++17 against the CPython C API: no build or run-time dependency beyond
a C++ compiler and setuptools. The AVX2 and AVX-512 kernels are compiled for their instruction
sets by pragmas in their own files and picked at run time from what the CPU reports.
"""

import sys

from setuptools import Extension, setup

NATIVE = "padconv_cli/kernels/native/"
SOURCES = ["module.cpp", "conv_generic.cpp", "conv_avx2.cpp", "conv_avx512.cpp"]

if sys.platform == "win32":
    compile_args = ["/O2", "/std:c++17", "/fp:precise"]
    link_args = []
else:
    # -ffp-contract=off: a multiply and an add are never fused behind the code's back, so
    # every output element is summed by the same operations wherever it is computed.
    compile_args = ["-O3", "-std=c++17", "-ffp-contract=off", "-fno-math-errno", "-pthread"]
    link_args = ["-pthread"]

setup(
    ext_modules=[
        Extension(
            "padconv_cli.kernels._native",
            sources=[NATIVE + name for name in SOURCES],
            depends=[NATIVE + "conv_job.h", NATIVE + "conv_impl.h", NATIVE + "pool.h"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            language="c++",
        )
    ]
)
