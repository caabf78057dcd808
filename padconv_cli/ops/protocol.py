"""What an operator module provides: the operator protocol.

Each module of :mod:`padconv_cli.ops` (``pad.py``, ``conv.py``...) defines one
``OPERATOR = Operator(...)``: its declarations (name, ONNX versions, inputs, attributes with
their flags and help, the command's texts) and the functions that hold every rule of the
operator.  Everything above the operators (the pipeline, the engines, the CLI, explain, emit,
check, audit, verify) looks the operator up once in :mod:`padconv_cli.ops` and calls these
fields; nothing there is keyed by an operator's name.  The fields are listed, with their
signatures, in ``docs/architecture.md``.

:class:`KernelCall` is what every path turns a command line or a model node into: the
operator's name, the ONNX version whose rules applied, the input arrays in the operator's
input order (None where omitted) and the attributes in kernel terms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

DATA, ATTRIBUTE = "data", "attribute"  # the roles of an input (see Input)
ALWAYS, UNLESS_MODEL, OPTIONAL = "always", "unless model", "optional"  # when one is required
REFERENCE_PEER, ONNXRUNTIME_PEER = "onnx.reference", "onnxruntime"  # the runtimes --check runs


@dataclass(frozen=True)
class Input:
    """One input of the ONNX node.  ``role`` DATA: a tensor the command takes as an argument
    (and the emitted model as a graph input); ATTRIBUTE: a node input padconv takes as an
    attribute (Pad's ``pads``).  ``required``: ALWAYS, UNLESS_MODEL (a ``--from-model`` node
    can give it) or OPTIONAL."""

    name: str
    role: str = DATA
    required: str = ALWAYS
    # the element type an inline literal given for this input takes (without --dtype): a
    # numpy type name (``float32``), or the name of an earlier input whose type it takes
    literal_type: str | None = None

    @property
    def metavar(self) -> str:
        """``X`` for a required argument, ``[W]`` for one that may be left out."""
        return self.name.upper() if self.required == ALWAYS else f"[{self.name.upper()}]"


@dataclass(frozen=True)
class Attribute:
    """One attribute in kernel terms, and its command-line flag.

    ``kind``: ``ints`` (a list of integers: words, commas or @FILE), ``int`` (one int64),
    ``choice`` (one of ``choices``) or ``text`` (read later, in the data's element type);
    ``required``: needed unless a ``--from-model`` node gives it."""

    name: str
    kind: str
    default: Any = None
    help: str = ""
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    show_default: bool = False
    required: bool = False

    @property
    def flag(self) -> str:
        """The command-line flag: ``--kernel-shape`` for ``kernel_shape``."""
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class KernelCall:
    """A resolved kernel invocation: the operator's kernel on ``arrays`` and ``attributes``."""

    op_type: str
    version: int
    arrays: tuple[Any, ...]
    attributes: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # one-line remarks for the user (an off-spec node computed)

    @property
    def operator(self) -> str:
        """``"Pad-2"``, ``"Conv-22"``: operator name and the version whose rules applied."""
        return f"{self.op_type}-{self.version}"

    def describe(self) -> str:
        """The attributes that were given, as ``name=value`` words (``mode=reflect pads=[0,2]``)."""
        defaults = {"auto_pad": "NOTSET", "group": 1}
        words = []
        for name, value in self.attributes.items():
            if value is None or defaults.get(name, object()) == value:
                continue
            words.append(f"{name}={_short(value, quote=name == 'constant_value')}")
        return " ".join(words)


@dataclass(frozen=True)
class ResolvedCall:
    """A kernel call ready for planning, and where its pieces came from."""

    call: KernelCall
    given: frozenset[str]  # attributes set by a flag or by the model (others are defaults)
    embedded: frozenset[str] = frozenset()  # data inputs taken from the model
    origin: Any = None  # the models.ModelNode the call came from
    overridden: tuple[str, ...] = field(default=())  # model attributes a flag replaced


def _short(value: Any, *, quote: bool = False) -> str:
    """Compact text of an attribute value: lists without spaces, numpy scalars as Python,
    strings quoted when ``quote`` (a string constant_value, unlike a mode name)."""
    import numpy as np
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_)):
        return str(value)  # shortest text that round-trips in the value's own type
    if isinstance(value, str) and not quote:
        return value
    return repr(value)


@dataclass(frozen=True)
class Command:
    """The texts of the operator's command: one-line summary, help, examples (shown
    right after the summary)."""

    summary: str
    help: str
    examples: str


Fn = Callable[..., Any]


@dataclass(frozen=True)
class Operator:
    """One operator padconv implements; every field is a rule of that operator (module doc)."""

    # declarations
    name: str
    command: str
    versions: tuple[int, ...]
    inputs: tuple[Input, ...]
    attributes: tuple[Attribute, ...]
    texts: Command
    max_inputs: Callable[[int], int]  # inputs a node of that version may list
    onnx_attribute_types: Mapping[str, int]  # AttributeProto type of each name, any version
    output_name: str
    # plan, kernel, needs
    plan: Fn  # (shapes, dtype, attributes) -> plan
    plan_fits: Fn  # (plan, shapes) -> bool: the plan was made for these shapes
    kernel: Fn  # (*arrays, **attributes) -> array: plans and runs
    run: Fn  # (plan, arrays, attributes) -> array: on a plan made beforehand
    typed: Fn  # (attributes, dtype) -> attributes read in the data's element type
    output_dtype: Fn  # (dtype, attributes, plan) -> np.dtype
    needs: Fn  # (arrays, plan, dtype, attributes, fmt) -> resources.Needs
    # engines
    plan_tiles: Fn  # (call, plan, limit) -> tiles; raises OutputTooLargeError if none fit
    run_engine: Fn  # (engine, source, others, plan, attributes, settings) -> tiled result
    # explain, emit, check, audit, verify
    explain: Fn  # (call, plan, source_of) -> attributes, sources, dims, flops, formula
    version_choice: Fn  # (dtype, attributes) -> onnx_graph.VersionChoice
    graph_parts: Fn  # (call, choice, embedded, plan) -> onnx_graph.GraphParts
    reference: Fn  # (call) -> the float64 (or exact) recomputation audit and check judge by
    error_bound: Fn  # (call, plan) -> per-element bound, or None: compared exactly
    known_deviation: Fn  # (peer, call, plan) -> why the peer refuses or differs, or None
    sample_arguments: Fn  # (case, folder) -> the command's arguments reproducing the case
    # model nodes
    node_call: Fn  # (version, attributes, inputs) -> KernelCall
    model_slots: Fn  # (origin, arrays, flags, embedded) -> the node's input arrays
    flag_rules: Fn  # (model_attributes, flags, arrays) -> None: flags drop model values
    notes: Fn = lambda given: ()  # (flags given) -> remarks on the command line
    # (arrays, attributes) -> plan, used instead of ``plan`` when set: a planner that needs
    # every input's element type too (the integer operators' zero points and scales), from
    # the inputs' declared shapes and types (nothing is read)
    plan_arrays: Fn | None = None
    # (call, ours, theirs) -> why a peer's result differs in a known, explained way (a
    # QLinearConv rounding tie, float32 requantization), or None: then it is a disagreement
    classify_difference: Fn | None = None
    engines: tuple[str, ...] = ("memory", "tiled", "dask")  # the engines that can run it

    @property
    def newest_version(self) -> int:
        """The newest ONNX version of the operator padconv implements."""
        return self.versions[-1]

    @property
    def data_inputs(self) -> tuple[Input, ...]:
        """The data inputs (the tensors a call takes as arguments), in node order."""
        return tuple(i for i in self.inputs if i.role == DATA)

    @property
    def input_names(self) -> tuple[str, ...]:
        """The names of the data inputs."""
        return tuple(i.name for i in self.data_inputs)

    @property
    def required_inputs(self) -> int:
        """How many data inputs a call cannot go without (the leading required ones)."""
        return sum(1 for i in self.inputs if i.role == DATA and i.required != OPTIONAL)

    @property
    def defaults(self) -> dict[str, Any]:
        """Every attribute's default (a call made from flags alone starts from these)."""
        return {a.name: a.default for a in self.attributes}

    @property
    def attribute_names(self) -> tuple[str, ...]:
        """The attributes in kernel terms, in declaration order."""
        return tuple(a.name for a in self.attributes)


def no_flag_rules(model_attributes: dict[str, Any], flags: Mapping[str, Any],
                  arrays: Sequence[Any]) -> None:
    """No model attribute loses its meaning when a flag is given."""


def no_known_deviation(peer: str, call: KernelCall, plan: Any) -> None:
    """No runtime is known to deviate from the specification on this operator."""


# AttributeProto.AttributeType numbers (onnx.proto) an operator declares its attributes with.
FLOAT, INT, STRING, TENSOR, FLOATS, INTS, STRINGS, SPARSE_TENSOR = 1, 2, 3, 4, 6, 7, 8, 11


def shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of an input (array, memory-mapped file, declared store) without reading it."""
    import numpy as np
    if value is None:
        return None
    shape = getattr(value, "shape", None)
    return tuple(int(d) for d in (shape if shape is not None else np.shape(value)))


def dtype_of(value: Any) -> np.dtype:
    """The element type of an input without reading it."""
    import numpy as np
    dtype = getattr(value, "dtype", None)
    return np.dtype(dtype) if dtype is not None else np.asarray(value).dtype
