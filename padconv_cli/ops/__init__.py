"""The operators padconv implements, their protocol and their one registry.

Each operator module (``pad.py``, ``conv.py``...) defines ``OPERATOR = Operator(...)``, every
rule of it (fields: ``docs/architecture.md``).  This lazy registry is the only place keyed by
operator names: it imports an operator's module only when that operator is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from padconv_cli.errors import AttributeValueError

if TYPE_CHECKING:
    import numpy as np

DATA, ATTRIBUTE = "data", "attribute"  # the roles of an input (see Input)
ALWAYS, UNLESS_MODEL, OPTIONAL = "always", "unless model", "optional"  # when one is required
REFERENCE_PEER, ONNXRUNTIME_PEER = "onnx.reference", "onnxruntime"  # the runtimes --check runs
# AttributeProto.AttributeType numbers (onnx.proto) an operator declares its attributes with.
FLOAT, INT, STRING, TENSOR, FLOATS, INTS, STRINGS, SPARSE_TENSOR = 1, 2, 3, 4, 6, 7, 8, 11


# NamedTuples, not dataclasses: a dataclass takes ~0.5 ms to create, a cost on every start-up.
class Input(NamedTuple):
    """One input of the ONNX node: ``role`` DATA or ATTRIBUTE (Pad's ``pads``), ``required``
    ALWAYS, UNLESS_MODEL or OPTIONAL, ``literal_type`` the type an inline literal takes
    without --dtype (a type name, or an earlier input's name)."""

    name: str
    role: str = DATA
    required: str = ALWAYS
    literal_type: str | None = None


class Attribute(NamedTuple):
    """One attribute in kernel terms and its flag (``kind``: ints, int, choice or text)."""

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


class KernelCall(NamedTuple):
    """The kernel on ``arrays`` (node order, None where omitted) and ``attributes`` (kernel
    terms), by the rules of ONNX version ``version``."""

    op_type: str
    version: int
    arrays: tuple[Any, ...]
    attributes: dict[str, Any]
    notes: tuple[str, ...] = ()  # one-line remarks for the user (an off-spec node computed)

    @property
    def operator(self) -> str:
        """``"Pad-2"``, ``"Conv-22"``: the name and the version whose rules applied."""
        return f"{self.op_type}-{self.version}"

    def describe(self) -> str:
        """The attributes that were given, as ``name=value`` words (``mode=reflect pads=[0,2]``)."""
        defaults = {"auto_pad": "NOTSET", "group": 1}
        return " ".join(f"{name}={_short(value, quote=name == 'constant_value')}"
                        for name, value in self.attributes.items()
                        if value is not None and defaults.get(name, object()) != value)


class ResolvedCall(NamedTuple):
    """A kernel call ready for planning, and where its pieces came from."""

    call: KernelCall
    given: frozenset[str]  # attributes set by a flag or by the model (others are defaults)
    embedded: frozenset[str] = frozenset()  # data inputs taken from the model
    origin: Any = None  # the models.ModelNode the call came from
    overridden: tuple[str, ...] = ()  # model attributes a flag replaced


def _short(value: Any, *, quote: bool = False) -> str:
    """Compact text of an attribute value: lists without spaces, numpy scalars as Python,
    strings quoted when ``quote``."""
    import numpy as np

    if isinstance(value, (tuple, list)):
        return "[" + ",".join(str(v) for v in value) + "]"
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_)):
        return str(value)  # shortest text that round-trips in the value's own type
    return value if isinstance(value, str) and not quote else repr(value)


class Command(NamedTuple):
    """The command's one-line summary, help and examples."""

    summary: str
    help: str
    examples: str


Fn = Callable[..., Any]


class Operator(NamedTuple):
    """One operator; each field is a rule of it (signatures: ``docs/architecture.md``)."""

    # declarations
    name: str
    command: str
    versions: tuple[int, ...]
    inputs: tuple[Input, ...]
    attributes: tuple[Attribute, ...]
    texts: Command
    max_inputs: Callable[[int], int]
    onnx_attribute_types: Mapping[str, int]
    output_name: str
    # plan, kernel, needs
    plan: Fn
    kernel: Fn
    run: Fn
    output_dtype: Fn
    needs: Fn
    # engines
    plan_tiles: Fn
    run_engine: Fn
    # explain, emit, check, audit, verify
    explain: Fn
    version_choice: Fn
    graph_parts: Fn
    reference: Fn
    sample_arguments: Fn
    # model nodes
    node_call: Fn
    model_slots: Fn
    typed: Fn = lambda attributes, dtype: dict(attributes)  # as given, whatever the type
    error_bound: Fn = lambda call, plan=None: None  # the result is compared exactly
    known_deviation: Fn = lambda peer, call, plan: None  # no runtime is known to deviate
    flag_rules: Fn = lambda model_attributes, flags, arrays: None  # no attribute drops
    notes: Fn = lambda given: ()
    plan_arrays: Fn | None = None
    classify_difference: Fn | None = None
    engines: tuple[str, ...] = ("memory", "tiled", "dask")

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
        """How many data inputs a call cannot go without."""
        return sum(1 for i in self.data_inputs if i.required != OPTIONAL)

    @property
    def defaults(self) -> dict[str, Any]:
        """Every attribute's default (a call made from flags alone starts from these)."""
        return {a.name: a.default for a in self.attributes}

    @property
    def attribute_names(self) -> tuple[str, ...]:
        """The attributes in kernel terms, in declaration order."""
        return tuple(a.name for a in self.attributes)


def shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of an input (array, declared .npy file or store) without reading it."""
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


# --- the registry ------------------------------------------------------------------------------

# ONNX name -> (command, module defining its OPERATOR); adding an operator adds one line here
MODULES = {
    "Pad": ("pad", "padconv_cli.ops.pad"),
    "Conv": ("conv", "padconv_cli.ops.conv"),
    "ConvTranspose": ("conv-transpose", "padconv_cli.ops.conv_transpose"),
    "ConvInteger": ("conv-integer", "padconv_cli.ops.conv_integer"),
    "QLinearConv": ("qlinear-conv", "padconv_cli.ops.qlinear_conv"),
}


class _Registry(Mapping):
    """Operators by ONNX name (or ``by_command``), each module imported on first lookup."""

    def __init__(self, by_command: bool) -> None:
        self._modules = {(command if by_command else name): module
                         for name, (command, module) in MODULES.items()}
        self._loaded: dict[str, Operator] = {}

    def __getitem__(self, key: str) -> Operator:
        if key not in self._loaded:
            self._loaded[key] = importlib.import_module(self._modules[key]).OPERATOR
        return self._loaded[key]

    def __setitem__(self, key: str, entry: Operator) -> None:  # a test declares an operator
        self._modules.setdefault(key, "")
        self._loaded[key] = entry

    def __contains__(self, key: object) -> bool:  # a name is known without its import
        return key in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


OPERATORS: Mapping[str, Operator] = _Registry(by_command=False)
COMMANDS: Mapping[str, Operator] = _Registry(by_command=True)


def find(name: str) -> Operator | None:
    """The operator called ``name`` (ONNX name or command), None for one padconv lacks."""
    return OPERATORS.get(name) or COMMANDS.get(name)


def operator(name: str) -> Operator:
    """The operator called ``name`` (``Pad``/``Conv``, or the command ``pad``/``conv``)."""
    entry = find(name)
    if entry is None:
        raise AttributeValueError(f"padconv implements {', '.join(OPERATORS)}, not {name!r}",
                                  param="operator")
    return entry


def plain_call(op_type: str, arrays: tuple[Any, ...], flags: dict[str, Any]) -> ResolvedCall:
    """A call from the operator's defaults and ``flags`` (read in the data's type), by the
    newest version."""
    entry = operator(op_type)
    attributes = {**entry.defaults, **flags}
    if arrays and arrays[0] is not None:
        attributes = entry.typed(attributes, dtype_of(arrays[0]))
    call = KernelCall(entry.name, entry.versions[-1], tuple(arrays), attributes)
    return ResolvedCall(call, frozenset(flags))


def plan_call(call: KernelCall) -> Any:
    """The plan of ``call`` by its operator's planner, from the inputs' shapes (or
    ``plan_arrays``)."""
    entry = operator(call.op_type)
    if entry.plan_arrays is not None:
        return entry.plan_arrays(call.arrays, call.attributes)
    shapes = [shape_of(a) for a in call.arrays]
    return entry.plan(shapes, dtype_of(call.arrays[0]), call.attributes)


def error_bound(call: KernelCall, plan: Any = None) -> Any:
    """The per-element error bound ``call``'s result is judged by (None: compared exactly)."""
    return operator(call.op_type).error_bound(call, plan)


def compute(call: KernelCall) -> Any:
    """Run ``call``'s kernel (it plans and computes) and return its single output."""
    return operator(call.op_type).kernel(*call.arrays, **call.attributes)
