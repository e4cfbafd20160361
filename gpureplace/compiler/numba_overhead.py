"""What Numba repeats on every pass and every call that a GPU compile need not pay for again.

A small kernel's front end runs 27 of Numba's passes; measured on the development machine, the
bookkeeping around them (not the passes' work) was 1.5-3 ms of a 23-ms compile:

- ``LeanPassManager``: Numba's pass runner formats the compile's argument types and flags for an
  event record before every pass, whether or not anyone listens, and re-checks that no pass left
  ``ir.Del`` nodes (a check on Numba's own passes).  Ours runs each pass in the same error
  context (so messages still say "During: Pass ..."), records the same timings, and hands over
  to Numba's runner whenever someone listens to its compiler events or asked it to print the IR
  around a pass (``NUMBA_DEBUG_PRINT_AFTER`` ...).
- ``GPUFlags``: Numba's flags compute a dict of their ~40 options to be hashed or compared, which
  every call to an ``@overload``-based function does through its template's cache; ours give the
  same dict, hash and equality without walking the options.
- ``abi_sizeof``: llvmlite answers "how many bytes is this LLVM type" by printing a module and
  having LLVM parse it; Numba asks for every variable it stores.  The answer for one type
  string and one data layout never changes: kept.
- ``_has_loc``: Numba asks ``inspect.signature`` whether a lowering takes ``loc`` each time it
  wraps one (every call it lowers); kept per function.
- ``list_vars``: every analysis Numba re-runs after a pass (use/def maps, liveness, the
  insertion of ``del``s: nine times per compile) asks each instruction for the variables it
  uses, which Numba answers by walking the instruction's attributes recursively, building and
  extending a list at every level and testing each value against four classes.  Ours walks the
  same attributes in the same order into one list, with the common types told apart by
  ``type(...) is``; the same variables, in the same order, come back.
- ``PostProcessor.run``: after a pass changes the IR, Numba canonicalises its control flow and
  then works out each variable's lifetime and each block's live variables at once (control flow
  graph, use/def maps, live and dead maps: eight times a compile), though a GPU compile's only
  readers of them are a ``with`` block's lifting and ``literal_unroll``.  In our passes the
  canonicalisation still runs; the analyses are left to Numba's own lazy ``VariableLifetime``
  and a mapping that computes the blocks' live variables when first read, both on the IR as it
  is then.  The ``literal_unroll`` pass (whose own pipeline reads the live map), generators,
  ``del`` insertion and every compile outside our pass runner keep Numba's eager analyses.
- the LLVM lock's events: Numba has llvmlite call it back around every call into LLVM (a
  small kernel's compile makes 90 to 200) to record a ``numba:llvm_lock`` event, made and
  broadcast whether or not anyone listens: 4 us of the 8 each call took.  Ours record the
  same event only while someone listens to that kind.
"""

from __future__ import annotations

import inspect
import threading
import time
import weakref

from numba.core import analysis as _nb_analysis
from numba.core import base as _nb_base
from numba.core import errors
from numba.core import postproc as _nb_postproc
from numba.core import transforms as _nb_transforms
from numba.core import ir as _nb_ir
from numba.core import event as _nb_event
from numba.core.compiler import Flags
from numba.core.compiler_lock import global_compiler_lock
from numba.core.compiler_machinery import PassManager, pass_timings


# -- the pass runner ----------------------------------------------------------------------------

def _listened():
    """Whether anyone listens to Numba's compiler events (then Numba's runner reports them)."""
    registered = getattr(_nb_event, "_registered", None)
    return registered is None or bool(registered.get("numba:run_pass"))


def _mutated(pss, result):
    if result is not True and result is not False:
        raise ValueError(f"CompilerPass implementations should return True/False. "
                         f"CompilerPass with name '{pss.name()}' did not.")
    return result


#: Passes that read the variable lifetimes a post-processing computed (and may run a pipeline of
#: Numba's own inside): Numba's eager analyses while they run.
_EAGER_PASSES = frozenset({"literal_unroll"})
_lean = threading.local()        # .on: inside one of our passes (PostProcessor.run is lean)


class LeanPassManager(PassManager):
    """Numba's PassManager, without the per-pass event record and self-checks (see above)."""

    @global_compiler_lock
    def _runPass(self, index, pss, internal_state):
        if (self._print_before or self._print_after or self._print_wrap or self._ENFORCING
                or _listened()):
            return PassManager._runPass(self, index, pss, internal_state)
        pss.analysis = self._analysis
        clock = time.perf_counter
        outer = getattr(_lean, "on", False)
        _lean.on = pss.name() not in _EAGER_PASSES
        try:
            with errors.new_error_context("Pass {name}", name=pss.name()):
                t0 = clock()
                _mutated(pss, pss.run_initialization(internal_state))
                t1 = clock()
                _mutated(pss, pss.run_pass(internal_state))
                t2 = clock()
                _mutated(pss, pss.run_finalizer(internal_state))
                t3 = clock()
        finally:
            _lean.on = outer
        self.exec_times[f"{index}_{pss.name()}"] = pass_timings(t1 - t0, t2 - t1, t3 - t2)


# -- post-processing -------------------------------------------------------------------------------

_numba_post_process = _nb_postproc.PostProcessor.run


class _EntryVars(dict):
    """``func_ir.block_entry_vars`` worked out when first read (each block's live variables on
    entry, as Numba's post-processing computes them), on the IR of that moment."""

    def __init__(self, func_ir, lifetime):
        super().__init__()
        self._func_ir, self._lifetime = func_ir, lifetime

    def _fill(self):
        if self._lifetime is None:
            return
        vlt, self._lifetime = self._lifetime, None
        live = _nb_analysis.compute_live_variables(vlt.cfg, self._func_ir.blocks,
                                                   vlt.usedefs.defmap, vlt.deadmaps.combined)
        for offset, block in self._func_ir.blocks.items():
            dict.__setitem__(self, block, live[offset])

    def __missing__(self, block):
        if self._lifetime is None:
            raise KeyError(block)
        self._fill()
        return self[block]

    def __contains__(self, block):
        self._fill()
        return dict.__contains__(self, block)

    def __iter__(self):
        self._fill()
        return dict.__iter__(self)

    def __len__(self):
        self._fill()
        return dict.__len__(self)

    def get(self, block, default=None):
        self._fill()
        return dict.get(self, block, default)

    def keys(self):
        self._fill()
        return dict.keys(self)

    def values(self):
        self._fill()
        return dict.values(self)

    def items(self):
        self._fill()
        return dict.items(self)


def _post_process(self, emit_dels=False, extend_lifetimes=False):
    """Numba's ``PostProcessor.run``; inside our passes, the analyses left lazy (see above)."""
    func_ir = self.func_ir
    if emit_dels or not getattr(_lean, "on", False) or func_ir.is_generator:
        return _numba_post_process(self, emit_dels, extend_lifetimes)
    func_ir.blocks = _nb_transforms.canonicalize_cfg(func_ir.blocks)
    vlt = _nb_postproc.VariableLifetime(func_ir.blocks)
    func_ir.variable_lifetime = vlt
    func_ir.block_entry_vars = _EntryVars(func_ir, vlt)
    func_ir.generator_info = None


# -- flags -----------------------------------------------------------------------------------------

_DEFAULTS = {name: option.default for name, option in Flags.options.items()}
_HASH = hash(tuple(sorted(_DEFAULTS)))     # Numba's Flags hash their option names only


class GPUFlags(Flags):
    """Numba's Flags; ``values()``, hash and equality as Numba's, without walking every option."""

    __slots__ = ()

    def values(self):
        out = dict(_DEFAULTS)
        out.update(self._values)
        return out

    def __hash__(self):
        return _HASH

    def __eq__(self, other):
        if isinstance(other, GPUFlags):
            return self._values == other._values or self.values() == other.values()
        return super().__eq__(other)


# -- ABI sizes -------------------------------------------------------------------------------------

_sizes = {}     # (LLVM type text, target data) -> bytes


def abi_sizeof(target_data, lltype):
    """``lltype.get_abi_size(target_data)``, asked of LLVM once per type and target data (the
    key holds the target data, whose identity then stays its own)."""
    key = (str(lltype), target_data)
    size = _sizes.get(key)
    if size is None:
        size = _sizes[key] = lltype.get_abi_size(target_data)
    return size


# -- Numba's "does this lowering take loc?" --------------------------------------------------------

_takes_loc = weakref.WeakKeyDictionary()


def _has_loc(fn):
    try:
        return _takes_loc[fn]
    except (KeyError, TypeError):
        pass
    answer = "loc" in inspect.signature(fn).parameters
    try:
        _takes_loc[fn] = answer
    except TypeError:             # not weakly referenceable: asked again next time
        pass
    return answer


# -- the variables an instruction uses -------------------------------------------------------------

_Var, _Inst, _Stmt, _Expr = _nb_ir.Var, _nb_ir.Inst, _nb_ir.Stmt, _nb_ir.Expr
_numba_stmt_list_vars = _Stmt.list_vars
_numba_expr_list_vars = _Expr.list_vars
_numba_rec_list_vars = _Inst._rec_list_vars
# values that hold no variable and are none of the containers Numba looks into
_LEAVES = frozenset({str, int, float, bool, complex, bytes, type(None), _nb_ir.Loc,
                     type(len), type(_mutated), type, type(_nb_ir.UNDEFINED)})
_STMT, _EXPR, _OWN = 1, 2, 3
_how = {}       # instruction class -> how its variables are listed


def _how_of(cls):
    how = _how.get(cls)
    if how is None:
        lister = getattr(cls, "list_vars", None)
        how = _STMT if lister is _stmt_list_vars else _EXPR if lister is _expr_list_vars \
            else _OWN
        _how[cls] = how
    return how


def _collect(val, out):
    """Numba's ``Inst._rec_list_vars(val)``, appended to ``out``."""
    cls = type(val)
    if cls is _Var:
        out.append(val)
    elif cls in _LEAVES:
        pass
    elif cls is dict:
        for v in val.values():
            _collect(v, out)
    elif cls is list or cls is tuple:
        for v in val:
            _collect(v, out)
    elif isinstance(val, _Var):
        out.append(val)
    elif isinstance(val, _Inst):
        how = _how_of(cls)
        if how == _STMT:
            _collect(val.__dict__, out)
        elif how == _EXPR:
            _collect(val._kws, out)
        else:
            out.extend(val.list_vars())
    elif isinstance(val, (list, tuple)):
        for v in val:
            _collect(v, out)
    elif isinstance(val, dict):
        for v in val.values():
            _collect(v, out)


def _rec_list_vars(self, val):
    out = []
    _collect(val, out)
    return out


def _stmt_list_vars(self):
    out = []
    _collect(self.__dict__, out)
    return out


def _expr_list_vars(self):
    out = []
    _collect(self._kws, out)
    return out


# -- the LLVM lock's events ---------------------------------------------------------------------

_LOCK_EVENT = "numba:llvm_lock"


def _lock_entered():
    if _nb_event._registered.get(_LOCK_EVENT):
        _nb_event.start_event(_LOCK_EVENT)


def _lock_left():
    if _nb_event._registered.get(_LOCK_EVENT):
        _nb_event.end_event(_LOCK_EVENT)


def _lean_lock_events():
    """Put ``_lock_entered`` / ``_lock_left`` where Numba registered its own LLVM-lock
    callbacks (found by name: a Numba that registers others keeps them)."""
    import llvmlite.binding as llvm
    lock = getattr(llvm.ffi.lib, "_lock", None)
    callbacks = getattr(lock, "_cblist", None)
    if not isinstance(callbacks, list):
        return
    for k, (enter, leave) in enumerate(callbacks):
        if getattr(enter, "__qualname__", "") == \
                "_initialize_llvm_lock_event.<locals>.enter_fn":
            callbacks[k] = (_lock_entered, _lock_left)


def install():
    """Numba's module-level ``_has_loc`` answered from the cache (the same answer: a function's
    parameters do not change), its instructions' ``list_vars`` by ``_collect`` (the same
    variables in the same order), its post-processing lean inside our passes, and its LLVM
    lock's events recorded only for listeners."""
    _lean_lock_events()
    if getattr(_nb_base._has_loc, "__module__", None) != __name__:
        _nb_base._has_loc = _has_loc
    if _Stmt.list_vars is _numba_stmt_list_vars:
        _Inst._rec_list_vars = _rec_list_vars
        _Stmt.list_vars = _stmt_list_vars
        _Expr.list_vars = _expr_list_vars
    if _nb_postproc.PostProcessor.run is _numba_post_process:
        _nb_postproc.PostProcessor.run = _post_process
