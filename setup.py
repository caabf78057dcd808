"""Build of padconv's native Conv extension (everything else is in pyproject.toml).

The extension is plain C++17 against the CPython C API: no build or run-time dependency beyond
a C++ compiler and setuptools. The AVX2 and AVX-512 kernels are compiled for their instruction
sets by pragmas in their own files and picked at run time from what the CPU reports.
"""

import os
import shutil
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build import build
from setuptools.command.build_ext import build_ext

NATIVE = "padconv_cli/kernels/native/"
SOURCES = ["module.cpp", "conv_generic.cpp", "conv_avx2.cpp", "conv_avx2_plane.cpp",
           "conv_avx512.cpp", "qconv_module.cpp", "qconv_generic.cpp", "qconv_avx2.cpp",
           "qconv_vnni.cpp", "conv_transpose_phases.cpp", "conv_transpose_run.cpp", "pad.cpp"]

if sys.platform == "win32":
    compile_args = ["/O2", "/std:c++17", "/fp:precise"]
    link_args = []
else:
    # -ffp-contract=off: a multiply and an add are never fused behind the code's back, so
    # every output element is summed by the same operations wherever it is computed.
    # -fno-wrapv: the interpreter's own flags ask for wrapping signed arithmetic, which keeps
    # the compiler from simplifying the kernels' index arithmetic (measured: the 3x3 plane
    # kernel 4% slower); nothing here relies on signed overflow.
    compile_args = ["-O3", "-std=c++17", "-ffp-contract=off", "-fno-math-errno", "-fno-wrapv",
                    "-pthread"]
    link_args = ["-pthread"]

NO_COMPILER_HELP = """\
padconv's native Conv core is C++17 and this machine cannot build it: {missing}.
  Either install the build tools:
    Debian, Ubuntu:  sudo apt install g++ python3-dev
    Fedora, RHEL:    sudo dnf install gcc-c++ python3-devel
    Alpine:          apk add g++ python3-dev
    macOS:           xcode-select --install
  or install a prebuilt wheel, which needs no compiler: pip install padconv-*.whl
  (set CXX to use another C++ compiler)"""


def missing_build_tools() -> list[str]:
    """What the native build needs and cannot find: the C++ compiler and linker commands that
    setuptools will run (from CXX, CC or the interpreter's build configuration), looked up on
    PATH, and the Python headers (Python.h).  Empty on Windows, where MSVC is found otherwise."""
    if sys.platform == "win32":
        return []
    from distutils.ccompiler import new_compiler
    from distutils.sysconfig import customize_compiler

    compiler = new_compiler()
    customize_compiler(compiler)
    programs = {}  # program -> its role, in the order setuptools runs them
    for role, name, fallback in (("compiler", "compiler_so_cxx", "compiler_cxx"),
                                 ("linker", "linker_so_cxx", "linker_so")):
        program = (getattr(compiler, name, None) or getattr(compiler, fallback))[0]
        programs.setdefault(program, role)
    missing = [f"the C++ {role} '{program}' was not found"
               + ("" if os.sep in program else " on PATH")
               for program, role in programs.items() if shutil.which(program) is None]
    headers = sysconfig.get_path("include")
    if not os.path.isfile(os.path.join(headers, "Python.h")):
        missing.append(f"the Python headers (Python.h) are not in {headers}")
    return missing


def refuse_without_build_tools() -> None:
    """Stop the build with :data:`NO_COMPILER_HELP` when :func:`missing_build_tools` finds any:
    one short message saying what to install, instead of the compiler's 'No such file or
    directory' after a hundred lines of copied files."""
    from distutils.errors import DistutilsPlatformError

    missing = missing_build_tools()
    if missing:
        raise DistutilsPlatformError(NO_COMPILER_HELP.format(missing="; ".join(missing)))


class build_checking_tools_first(build):  # noqa: N801 (a setuptools command name)
    """``build`` (wheels, ``pip install .``) checks the build tools before copying anything."""

    def run(self):
        refuse_without_build_tools()
        super().run()


class build_ext_sources_side_by_side(build_ext):  # noqa: N801 (a setuptools command name)
    """Compiles the extension's sources side by side, one per core (setuptools compiles the
    sources of one extension one after another): about half the build time on two cores."""

    def run(self):
        refuse_without_build_tools()  # editable installs run build_ext without build
        super().run()

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
    cmdclass={"build": build_checking_tools_first,
              "build_ext": build_ext_sources_side_by_side},
    ext_modules=[
        Extension(
            "padconv_cli.kernels._native",
            sources=[NATIVE + name for name in SOURCES],
            depends=[NATIVE + "conv_job.h", NATIVE + "conv_impl.h", NATIVE + "conv_depthwise.h",
                     NATIVE + "pool.h", NATIVE + "stop.h", NATIVE + "f16c_widen.h",
                     NATIVE + "avx2_vectors.h", NATIVE + "qconv.h", NATIVE + "qconv_panel.h"],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            language="c++",
        )
    ]
)
