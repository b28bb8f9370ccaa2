"""torch.nn.Modules over compiled moe-mlir layers (docs/python.md).

MoELayer and SoftMoELayer compile their layer once (moe_mlir.compile: the
forward @f and its gradient @f_vjp, cached on disk), keep the weights as
nn.Parameters, and run forward and backward in the compiled code through a
torch.autograd.Function.
"""
try:
    import torch
except ImportError:
    raise ImportError("moe_mlir.torch needs PyTorch (Debian: apt install python3-torch); "
                      "moe_mlir itself (compile) works without it") from None

import os
import re

from . import _ELEMENT, Error as _Error, _layers, compile as _compile

__all__ = ["MoELayer", "SoftMoELayer"]

# The layers' element types: MLIR name <-> torch dtype.
_TORCH = {e: getattr(torch, _ELEMENT[e]) for e in _layers.DTYPES}
_DTYPE = {t: e for e, t in _TORCH.items()}


class _Apply(torch.autograd.Function):
    """y = f(x, [seed], *params); the backward is f_vjp, which recomputes the
    forward (same routing: same seed) and returns every gradient at once."""

    @staticmethod
    def forward(ctx, module, x, seed, *params):
        fn, _ = module._functions(seed is not None)
        args = [x] + ([seed] if seed is not None else []) + list(params)
        out = fn(*args)
        ctx.module, ctx.training_fn = module, seed is not None
        ctx.save_for_backward(x, seed if seed is not None else torch.empty(0), *params)
        return out

    @staticmethod
    def backward(ctx, *grads):
        x, seed, *params = ctx.saved_tensors
        training = ctx.training_fn
        _, vjp = ctx.module._functions(training)
        cot = []
        for g, ty in zip(grads, vjp.arguments[len(vjp.arguments) - len(grads):]):
            if g is None:
                g = torch.zeros([ctx.module._dyn(s, x) for s in ty.shape],
                                dtype=ty.torch_dtype(), device=x.device)
            cot.append(g.to(ty.torch_dtype()).contiguous())
        args = [x] + ([seed] if training else []) + list(params) + cot
        out = vjp(*args)
        out = out if isinstance(out, tuple) else (out,)
        n_results = len(grads)
        dx, *dparams = out[n_results:]
        # Every float argument has a gradient, in argument order; a
        # parameter that is not trained (the selection bias) gets None.
        dparams = [d if p.requires_grad else None for d, p in zip(dparams, params)]
        return (None, dx, None, *dparams)


class _CompiledLayer(torch.nn.Module):
    """The common part: parameters from a list of _layers.Param, the layer's
    MLIR per mode (texts: {training: text}), its functions per (target,
    chip, mode), compiled or from a prepared library, the call through
    _Apply."""

    def __init__(self, texts, params, dtype, device, chip, values=None, entry="f",
                 library=None):
        super().__init__()
        if dtype not in _DTYPE:
            raise ValueError(f"dtype must be torch.float32, torch.bfloat16 or torch.float16, not {dtype}")
        self._texts, self._params, self._chip, self._entry = texts, params, chip, entry
        self._library = library
        self._libraries = {}
        self._names = []
        for p in params:
            attr = p.name.replace(".", "_")
            t = torch.empty(p.shape, dtype=_TORCH[p.element], device=device)
            with torch.no_grad():
                if values is not None:
                    t.copy_(values[p.name])
                elif p.init == "normal":
                    t.normal_(0.0, _layers.init_scale(p))
                elif p.init == "one":
                    t.fill_(1.0)
                else:
                    t.zero_()
            if p.trainable:
                self.register_parameter(attr, torch.nn.Parameter(t))
            else:
                self.register_buffer(attr, t)
            self._names.append(attr)

    def _tensors(self):
        return [getattr(self, n) for n in self._names]

    def _target(self):
        device = self._tensors()[0].device
        if device.type != "cuda":
            return "cpu", None
        chip = self._chip
        if chip is None:  # the device's own: sm_90a on a Hopper (wgmma)
            major, minor = torch.cuda.get_device_capability(device)
            chip = "sm_90a" if (major, minor) == (9, 0) else "sm_%d%d" % (major, minor)
        return "cuda", chip

    def _functions(self, training):
        """(@f, @f_vjp) of the layer function of the mode, for the device the
        parameters are on: from the library given to the constructor
        (checked once per target), else compiled (and cached)."""
        target, chip = self._target()
        key = (target, chip, training)
        if key not in self._libraries:
            if self._library is not None:
                self._libraries[key] = self._prebuilt(target)
            else:
                lib = _compile(self._texts[training], target=target, chip=chip, vjp=True,
                               entries=[self._entry])
                self._libraries[key] = (lib[self._entry], lib[self._entry + "_vjp"])
        return self._libraries[key]

    @staticmethod
    def _dyn(size, x):
        return x.shape[0] if size is None else size

    def _run(self, x, seed):
        params = self._tensors()
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in params)):
            return _Apply.apply(self, x, seed, *params)
        fn, _ = self._functions(seed is not None)
        return fn(*([x] + ([seed] if seed is not None else []) + params))


class MoELayer(_CompiledLayer):
    """A token-choice MoE layer (moe.layer, docs/spec.md 3.1 and 3.1.1),
    compiled. x: [..., d_model] of the layer's dtype; returns y of x's shape,
    or (y, aux_loss) for routing='moesart' (aux_loss: the trimmed lasso in
    training mode, a zero tensor in eval mode).

    routing: 'dense', 'top_k' (k; score 'softmax'|'sigmoid', normalize,
    scale, groups, group_k, selection_bias) or 'moesart' (k >= 2; adjust
    'small_random'|'zero'|'large'; trimmed_lasso). activation: gelu,
    gelu_tanh, relu, silu, swiglu, geglu. Optional router_bias,
    expert_bias, a shared expert of width shared_hidden (with shared_gate),
    capacity_factor.

    Parameters (their spec names with '_' for '.'): router_weight [D, E],
    router_bias [E], experts_w1 [E, D, H] ([E, D, 2H] gated), experts_w2
    [E, H, D], experts_b1, experts_b2, shared_w1, shared_w2, shared_gate;
    router_selection_bias [E] (f32) is a buffer: DeepSeek updates it outside
    gradient descent.

    library: a Library (moe_mlir.load) that already holds this layer's @f
    and @f_vjp, compiled with --vjp from exactly text() (e.g. on another
    machine); its signature and its source's SHA-256 are checked. Not for
    routing='moesart'.

    last_seed: the seed of the last training-mode MOESART call (an int), drawn
    from torch's default generator."""

    def __init__(self, d_model, d_hidden, num_experts, routing="top_k", k=2,
                 activation="gelu", *, dtype=torch.float32, device="cpu", chip=None,
                 library=None, **options):
        if routing == "dense":
            k = None
        moesart = routing == "moesart"
        common = dict(d_model=d_model, d_hidden=d_hidden, num_experts=num_experts,
                      routing=routing, k=k, activation=activation,
                      dtype=_DTYPE.get(dtype, "f32"), **options)
        if moesart and library is not None:
            raise ValueError("library= is for layers without a training-mode function "
                             "(routing='moesart' compiles two)")
        eval_text, params = _layers.layer_function("f", **common)
        texts = {False: eval_text}
        if moesart:
            texts[True], _ = _layers.layer_function("f", training=True, **common)
        super().__init__(texts, params, dtype, device, chip, library=library)
        self.d_model, self.dtype, self.moesart = d_model, dtype, moesart
        self.last_seed = None
        if library is not None:
            self._signature = _layers.signature(params, d_model, common["dtype"])
            self._functions(False)  # check it now

    def _prebuilt(self, target):
        """(@f, @f_vjp) of the library given to the constructor, checked
        against the layer's signature and source for `target`."""
        lib, want = self._library, self._signature
        if lib.target != target:
            raise ValueError(f"MoELayer: the library {lib.path} is for target {lib.target}, "
                             f"the parameters are on a {target} device")
        for name in ("f", "f_vjp"):
            if name not in lib.functions:
                raise ValueError(f"MoELayer: the library {lib.path} exports no @{name} "
                                 f"(compile the layer's @f with --vjp)")
        if lib["f"].signature != want:
            raise ValueError(f"MoELayer: the library {lib.path} was compiled for @f {lib['f'].signature}, "
                             f"this layer is {want}")
        # Same types are not the same layer (routing, activation): the
        # library must come from this layer's own text.
        import hashlib
        digest = hashlib.sha256(self._texts[False].encode()).hexdigest()
        if lib.source_sha256 != digest:
            raise ValueError(f"MoELayer: the library {lib.path} was not compiled from this layer's "
                             f"MLIR (MoELayer.text(): source SHA-256 {digest[:16]}..., the library's "
                             f"{(lib.source_sha256 or 'unknown')[:16]}...; same types, another layer?)")
        return lib["f"], lib["f_vjp"]

    def text(self, training=False):
        """The MLIR of the layer's function @f (training=True: the
        training-mode one of a MOESART layer), as compiled."""
        return self._texts[training]

    @classmethod
    def from_checkpoint(cls, checkpoint, layer, *, dtype=None, device="cpu", chip=None):
        """The MoE layer of index `layer` of a Hugging Face checkpoint (a
        directory, as moe-import reads it): its routing, activation and
        shared expert as moe-import writes them, its weights read from the
        checkpoint (memory-mapped, assembled as #moe.checkpoint says) into
        Parameters named after the layer function's arguments (wr, w1, w2,
        ...; a selection bias is a buffer). dtype: None keeps the
        checkpoint's type, else torch.float32/bfloat16/float16."""
        import subprocess
        import tempfile
        from . import _checkpoint, tool
        names = {None: "auto", **_DTYPE}
        if dtype not in names:
            raise ValueError(f"dtype must be None, torch.float32, torch.bfloat16 or torch.float16, not {dtype}")
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "layer.mlir")
            r = subprocess.run([tool("moe-import"), os.fspath(checkpoint), "-o", out,
                                "--layers=%d" % layer, "--dtype=" + names[dtype]],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise _Error("MoELayer.from_checkpoint: " + (r.stderr.strip() or r.stdout.strip()))
            with open(out) as f:
                text = f.read()
        entry = "layer_%d" % layer
        args = _checkpoint.parameters(text, entry)
        m = re.search(r"selection_bias\(%(\w+)\)", text)
        bias = m.group(1) if m else None
        ckpt = _checkpoint.Checkpoint(os.fspath(checkpoint))
        params, values = [], {}
        for ssa, shape, element, tensors, transpose in args:
            params.append(_layers.Param(ssa, shape, element, trainable=ssa != bias))
            values[ssa] = _checkpoint.assemble(ckpt, shape, _TORCH[element], tensors, transpose)
        x_type = re.search(r"func\.func @%s\(%%\w+:\s*tensor<\?x(\d+)x(\w+)>" % entry, text)
        layer_dtype = _TORCH[x_type.group(2)]
        self = cls.__new__(cls)
        _CompiledLayer.__init__(self, {False: text}, params, layer_dtype, device, chip,
                                values=values, entry=entry)
        self.d_model, self.dtype, self.moesart, self.last_seed = int(x_type.group(1)), layer_dtype, False, None
        return self

    def forward(self, x):
        if x.shape[-1:] != (self.d_model,):
            raise ValueError(f"MoELayer: x has shape {list(x.shape)}, the last "
                             f"dimension must be d_model = {self.d_model}")
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.d_model)
        if not flat.is_contiguous():
            flat = flat.contiguous()
        if self.moesart and self.training:
            # A fresh seed per call from torch's default generator: a run is
            # reproducible under torch.manual_seed.
            seed = torch.randint(0, 2**62, (), dtype=torch.int64)
            self.last_seed = int(seed)
            y, aux = self._run(flat, seed.to(flat.device))
            return y.reshape(*lead, self.d_model), aux
        y = self._run(flat, None)
        y = y.reshape(*lead, self.d_model)
        if self.moesart:
            return y, torch.zeros((), dtype=torch.float32, device=y.device)
        return y


class SoftMoELayer(_CompiledLayer):
    """A Soft MoE layer (moe.soft_layer, docs/spec.md 3.2), compiled.
    x: [G, M, d_model] (G groups of M = group_size tokens; M is fixed when
    the layer is built, G is dynamic in the compiled function); returns y of
    x's shape.

    Parameters: router_phi [D, E, S], router_scale [] (learned_scale),
    experts_w1, experts_w2, experts_b1, experts_b2 (expert_bias)."""

    def __init__(self, d_model, d_hidden, num_experts, slots_per_expert=1, *, group_size,
                 activation="gelu", normalize=False, learned_scale=False, expert_bias=False,
                 dtype=torch.float32, device="cpu", chip=None):
        text, params = _layers.soft_layer_function(
            "f", d_model=d_model, d_hidden=d_hidden, num_experts=num_experts,
            slots_per_expert=slots_per_expert, group_size=group_size, activation=activation,
            dtype=_DTYPE.get(dtype, "f32"), normalize=normalize, learned_scale=learned_scale,
            expert_bias=expert_bias)
        # The group count is dynamic in the text: one library for every G.
        super().__init__({False: text}, params, dtype, device, chip)
        self.d_model, self.group_size, self.dtype = d_model, group_size, dtype

    def forward(self, x):
        if x.dim() != 3 or x.shape[1:] != (self.group_size, self.d_model):
            raise ValueError(f"SoftMoELayer: x has shape {list(x.shape)}, it must be "
                             f"[groups, {self.group_size}, {self.d_model}]")
        return self._run(x if x.is_contiguous() else x.contiguous(), None)
