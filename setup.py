"""Build of padconv's native Conv extension (everything else is in pyproject.toml).

The extension is plain C++17 against the CPython C API: no build or run-time dependency beyond
a C++ compiler and setuptools. The AVX2 and AVX-512 kernels are compiled for their instruction
sets by pragmas in their own files and picked at run time from what the CPU reports.
"""

import os
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

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

class build_ext_sources_side_by_side(build_ext):  # noqa: N801 (a setuptools command name)
    """Compiles the extension's sources side by side, one per core (setuptools compiles the
    sources of one extension one after another): about half the build time on two cores."""

    def build_extension(self, ext):
        compile_all = self.compiler.compile

        def compile_each(sources, *args, **kwargs):
            with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
                objects = pool.map(lambda source: compile_all([source], *args, **kwargs),
                                   sources)
                return [path for one in objects for path in one]

        self.compiler.compile = compile_each
        try:
            super().build_extension(ext)
        finally:
            del self.compiler.compile


setup(
    cmdclass={"build_ext": build_ext_sources_side_by_side},
    ext_modules=[
        Extension(
            "padconv_cli.kernels._native",
            sources=[NATIVE + name for name in SOURCES],
            depends=[NATIVE + "conv_job.h", NATIVE + "conv_impl.h", NATIVE + "pool.h",
                     NATIVE + "f16c_widen.h"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            language="c++",
        )
    ]
)
