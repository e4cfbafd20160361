"""Signature strings are parsed (compiler/signature.py), never evaluated: what numba-cuda users
write gives the types Numba's eval-based reader gives, and anything else, Python code included,
is refused with a message that marks the bad token, without running anything."""

import builtins

import pytest
from numba.core import sigutils, types, typing

from gpureplace import cuda
from gpureplace.compiler.signature import (SCALARS, SignatureParseError, normalize_signature,
                                           parse_signature)

#: signature strings as they appear in numba-cuda's tests and docs and in gpureplace's own
REAL_SIGNATURES = [
    "void()", "void(int32)", "void(int64,)", "void(int32, int32)", "void(int32[:])",
    "void(int32[:], int32)", "void(int32[::1])", "void(float32[:])", "void(float64[:,:])",
    "void(uint32[:,:], uint32)", "void(float32[:,::1])", "void(int32[:,:,::1])",
    "void(int32[::1,:,:])", "void(float64[:], float64[::1, :], float64[:, :], float64[:])",
    "void(float64[:, :, :, ::1], float64[::1])", "void(float32[:, :, ::1], float32[:, :, ::1])",
    "void(f2[:], f2, f2)", "void(b1[:], f2, f2, f2)", "b1(f2, f2)", "void(f4[:], f4, f4, f4)",
    "void(f8[:], f8, f8, f8)", "void(u8, int64[::1])", "void(intp[:])", "intp(intp)", "i8(i8)",
    "void(double[:])", "void(double[:],double[:])", "double(double[:],int64)",
    "void(float64[:], bool_)", "int64(boolean, boolean)", "void(boolean[:], int32[:], int32[:])",
    "void(complex128[:], complex128)", "void(complex128[::1], complex128[::1])",
    "complex128(complex128)", "void(float16[::1], complex64[::1])",
    "void(int32[:], float32[:], uint16[:], boolean)", "void(uint64[::1], uint8)",
    "void(int8[::1], float32[::1], int32[:, ::1], float32[:, ::1])",
    "float32(float32, float32)", "float64(float64,float64)", "float64(float64, uint32)",
    "int32()", "int32(float32[:])", "int32(float32[:, :])", "float32(float32[:], int64)",
    "float32(CPointer(float32), int32)", "void(int32[:], CPointer(int32), int32)",
    "int64(Tuple((int64[:], int64)))",
    "()", "(int32,)", "(intc,)", "(boolean,)", "(float32[:],)", "(i4, i4)", "(i4[::1], i4, i4)",
    "(float32[::1], intp)", "(int64[::1], int64, int64)", "(float64[::1], float32, float32)",
    "(f8, f8, f8[:])", "(float16, float16)", "(intp, intp, intp)",
]


def _same(got, want):
    """Equal, and the very same (interned) type objects, as Numba's reader returns them."""
    (gargs, gret), (wargs, wret) = got, want
    return (len(gargs) == len(wargs) and all(g is w for g, w in zip(gargs, wargs))
            and gret is wret)


@pytest.mark.parametrize("sig", REAL_SIGNATURES)
def test_real_signatures_give_what_numbas_reader_gives(sig):
    want = sigutils.normalize_signature(sig)        # the oracle: Numba's eval, on known text
    assert _same(parse_signature(sig), (tuple(want[0]), want[1]))


@pytest.mark.parametrize("sig", [
    "float32[:], int32",                      # a bare tuple
    "int32,",
    " void ( float32 [ : , : : 1 ] ,\n\tint32 ) ",
    "(void(int32))", "((int32, float32))", "float32[:](int32)",
    "(float32[::],)", "(float32[::1,],)", "(float32[::1,::1],)", "(float32[:, ::1, :],)",
    "(Tuple((int32, float32)),)", "(Tuple([int32, float32]),)", "(Tuple(()),)",
    "(Tuple((int32,)),)", "(UniTuple(float32, 3),)", "(UniTuple(float32[:], 2),)",
    "(UniTuple(int32, 0),)", "(CPointer(int32),)", "(CPointer(int32)[:],)", "(voidptr,)",
    "(Array(float32, 2, 'C'),)", "(Array(float32, 2, \"F\", readonly=True),)",
    "(Array(dtype=float64, ndim=3, layout='A', aligned=False),)",
    "(boolean, none, bool, byte, char, uchar, short, ushort, uint, long_, ulong, longlong)",
    "(ulonglong, ssize_t, size_t, intc, uintc, uintp, c8, c16, i1, i2, u1, u2, u4, f2)",
])
def test_every_form_numbas_reader_accepts_gives_the_same_types(sig):
    want = sigutils.normalize_signature(sig)
    assert _same(parse_signature(sig), (tuple(want[0]), want[1]))


def test_every_scalar_name_of_numba_is_known_and_means_the_same_type():
    scalar = (types.Integer, types.Float, types.Complex, types.Boolean, types.NoneType,
              types.RawPointer)
    names = [n for n, t in vars(types).items() if not n.startswith("_") and isinstance(t, scalar)]
    assert {"int32", "i4", "intp", "uintp", "float16", "f2", "double", "b1", "bool_", "c16",
            "void", "none", "voidptr", "byte"} <= set(names)
    for name in names:
        assert SCALARS[name] is getattr(types, name)
        assert parse_signature(f"void({name})") == ((getattr(types, name),), types.void)


@pytest.mark.parametrize("subscript", [
    (slice(None),), (slice(None, None, 1),),
    (slice(None), slice(None)), (slice(None), slice(None, None, 1)),
    (slice(None, None, 1), slice(None)), (slice(None, None, 1), slice(None, None, 1)),
    (slice(None), slice(None), slice(None, None, 1)), (slice(None, None, 1),) + (slice(None),) * 5,
    (slice(None),) * 7,
])
def test_array_layouts_follow_numbas_rule(subscript):
    text = ", ".join("::1" if s.step == 1 else ":" for s in subscript)
    want = types.float32[subscript if len(subscript) > 1 else subscript[0]]
    assert parse_signature(f"void(float32[{text}])")[0] == (want,)
    assert parse_signature(f"void(float32[{text}])")[0][0].layout == want.layout


def test_tuples_without_the_inner_parentheses_and_numpy_float_names_are_accepted():
    assert parse_signature("(Tuple(int32, float32),)")[0] == \
        (types.Tuple((types.int32, types.float32)),)
    assert parse_signature("(Tuple(int32, int32),)")[0] == (types.UniTuple(types.int32, 2),)
    assert parse_signature("half(single, half[:])") == \
        ((types.float32, types.float16[:]), types.float16)


def test_type_objects_tuples_and_signatures_pass_through():
    f32a = types.float32[:]
    assert normalize_signature((f32a, types.int32)) == ((f32a, types.int32), None)
    assert normalize_signature([f32a]) == ((f32a,), None)
    assert normalize_signature(()) == ((), None)
    assert normalize_signature(typing.signature(types.void, f32a)) == ((f32a,), types.void)
    with pytest.raises(TypeError, match=r"argument type 1 .* is str 'int32', not a Numba type"):
        normalize_signature((f32a, "int32"))
    with pytest.raises(TypeError, match="a signature is a string .* not int"):
        normalize_signature(3)


def _error(sig):
    with pytest.raises(SignatureParseError) as info:
        parse_signature(sig)
    return info.value


def test_errors_quote_the_signature_and_mark_the_bad_token():
    e = _error("void(flaot32[:])")
    assert isinstance(e, TypeError)
    assert e.position == 5 and e.signature == "void(flaot32[:])"
    assert str(e) == ("invalid signature 'void(flaot32[:])': unknown type name 'flaot32'; did "
                      "you mean 'float32'? (column 6)\n"
                      "    void(flaot32[:])\n"
                      "         ^^^^^^^")
    assert "did you mean 'float32'" in str(_error("void(Float32)"))
    assert "expected ',' or ']'" in str(_error("void(float32[:, : int32)"))
    assert "expected ',' or ')' (to close the '(' at column 5)" in str(_error("void(int32"))
    for bad in ("void(float32[3])", "void(float32[::2])", "void(float32[1:])",
                "void(float32[:2])"):
        assert "array layout must be ':' or '::1'" in str(_error(bad))
    # whitespace (a newline too) keeps the caret under the token
    e = _error("void(int32,\n   nope)")
    assert str(e).splitlines()[-1] == "    " + " " * 15 + "^^^^"


@pytest.mark.parametrize("sig, message", [
    ("", "it is empty; write 'void()'"),
    ("float32[:]", "a single type is not a signature; write 'void(float32[:])'"),
    ("(int32)", "or '(int32,)' for the argument types alone"),
    ("void(int)", "Python's int is 'int64'"),
    ("void(float)", "Python's float is 'float64'"),
    ("void(None)", "write 'void' for a function that returns nothing"),
    ("void(float32x4)", "'float32x4' is a CUDA vector type"),
    ("void(float4[:])", "'float4' is a CUDA vector type"),
    ("void(Optional(int32))", "'Optional' cannot be named in a signature string"),
    ("void(float32 *)", "a pointer is written CPointer(int32)"),
    ("void(float32[:][:])", "such as 'float32[:, :]'"),
    ("(void[:],)", "element type cannot be void"),
    ("void(int32)(int32)", "a signature has one list of argument types"),
    ("void(void(int32))", "a signature cannot be an argument type"),
    ("void(3)", "an argument type must be a type, not a number"),
    ("void(int32) int32", "expected ',' or the end of the signature, got 'int32'"),
    ("(Array(float32, 2),)", "Array needs layout; write Array(float32, 2, 'C')"),
    ("(Array(float32, 2, 'X'),)", "layout must be 'C', 'F' or 'A'"),
    ("(Array(float32, 1, 'C', frozen=True),)", "Array has no argument 'frozen'"),
    ("(UniTuple(float32),)", "UniTuple needs count"),
    ("(CPointer,)", "CPointer takes arguments, as in CPointer(int32)"),
    ("(" * 40 + "int32," + "),)" * 40, "nested more than 32 deep"),
])
def test_mistakes_say_what_to_write(sig, message):
    assert message in str(_error(sig))


@pytest.mark.parametrize("template", [
    "__import__('os').system('touch {path}')",
    "void(__import__('os').system('touch {path}'))",
    "(__import__('os').system('touch {path}'),)",
    "open('{path}', 'w')",
    "void(open('{path}', 'w'))",
    "(lambda: __import__('os').system('touch {path}'))()",
    "void(numba.types.float32)",
    "void(types.float32[:])",
    "void(int32.__class__)",
    "().__class__.__bases__[0].__subclasses__()",
    "[x for x in ()]",
    "float32 if __import__('os').system('touch {path}') else float32",
    "breakpoint()",
])
def test_python_code_in_a_signature_is_refused_and_never_run(template, tmp_path, monkeypatch):
    path = tmp_path / "pwned"
    sig = template.format(path=path)

    def forbidden(*args, **kwargs):
        raise AssertionError("a signature string reached eval/exec/compile/open")
    for name in ("eval", "exec", "compile", "breakpoint", "open"):
        monkeypatch.setattr(builtins, name, forbidden)
    monkeypatch.setattr(sigutils, "normalize_signature", forbidden)

    def k(x):
        pass
    with pytest.raises(SignatureParseError, match="invalid signature"):
        normalize_signature(sig)
    monkeypatch.undo()                              # cuda.jit's own machinery may compile
    monkeypatch.setattr(sigutils, "normalize_signature", forbidden)
    with pytest.raises(SignatureParseError):
        cuda.jit(k).compile(sig)
    with pytest.raises(SignatureParseError):
        cuda.jit(sig)(k)
    with pytest.raises(SignatureParseError):
        cuda.compile_ptx(k, sig)
    with pytest.raises(SignatureParseError, match=r"^declare_device\('ext'\): invalid"):
        cuda.declare_device("ext", sig)
    assert not path.exists()


def test_the_import_string_is_refused_at_the_dunder_name():
    e = _error("__import__('os').system('touch /tmp/pwned')")
    assert e.position == 0
    assert "'__import__' is not a type name" in str(e) and "nothing in it is run" in str(e)
    assert "write 'float32' instead of 'numba.types.float32'" in \
        str(_error("void(numba.types.float32[:])"))


def test_kernels_and_declarations_take_parsed_signatures(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("Numba's eval-based reader was used")
    monkeypatch.setattr(sigutils, "normalize_signature", forbidden)

    def scale(out, x, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * a
    k = cuda.jit("void(float32[::1], float32[::1], float32)")(scale)
    assert list(k.overloads) == [(types.float32[::1], types.float32[::1], types.float32)]
    ptx, ret = cuda.compile_ptx(scale, " void( float64[:], float64[:],\n float64 ) ")
    assert ".entry" in ptx and ret == types.void
    decl = cuda.declare_device("ext_scaled", "float32(float32, CPointer(int32))")
    assert decl.sig == typing.signature(types.float32, types.float32, types.CPointer(types.int32))
