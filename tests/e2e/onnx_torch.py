"""A small ONNX-to-PyTorch interpreter: the reference side of the end-to-end training tests.

Contract: OnnxTorch(model_proto) is an nn.Module whose float initializers are nn.Parameters (under
their ONNX names, see .param(name)) and whose other initializers (integer tensors, BatchNormalization
running statistics) are buffers. forward(feeds) runs the graph's nodes in order with torch ops and
returns {output name: tensor}, so torch autograd differentiates exactly the ONNX graph and gives the
reference gradients for Scorch's autodiff. Run with Debian's /usr/bin/python3 (torch 1.13, onnx 1.12).

Semantics follow the ONNX operator spec (opset 13-17) for the ops our generated models and the
torchvision exports use. Two training-specific choices, matching what `scorch-run train` does:
  - bn_training=True runs every BatchNormalization with batch statistics (ONNX training_mode=1),
    whatever the node's attribute says (autodiff/training.c switches them all). torch's momentum is
    1 - ONNX momentum. The running statistics are outputs only; they never feed the loss.
  - dtype: the float dtype everything runs in (float64 gives a reference free of fp32 rounding).
Anything else raises NotImplementedError naming the op, so a model the interpreter cannot run fails
loudly instead of being approximated.
"""
import re

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

_ONNX_TO_TORCH = {
    onnx.TensorProto.FLOAT: None,  # the working float dtype
    onnx.TensorProto.DOUBLE: None,
    onnx.TensorProto.FLOAT16: None,
    onnx.TensorProto.INT64: torch.int64,
    onnx.TensorProto.INT32: torch.int32,
    onnx.TensorProto.INT8: torch.int8,
    onnx.TensorProto.UINT8: torch.uint8,
    onnx.TensorProto.BOOL: torch.bool,
}


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _key(name, index):
    """nn.Module attribute names may not contain '.', so initializers are stored under a mangled,
    unique key (the index keeps names that mangle alike apart)."""
    return "i%d_%s" % (index, re.sub(r"[^A-Za-z0-9_]", "_", name))


def _ints(t):
    return [int(v) for v in t.reshape(-1).tolist()]


class OnnxTorch(torch.nn.Module):
    def __init__(self, model, dtype=torch.float64, bn_training=True):
        super().__init__()
        self.graph = model.graph
        self.dtype = dtype
        self.bn_training = bn_training
        bn_stats = set()
        for n in self.graph.node:
            if n.op_type == "BatchNormalization":
                bn_stats.update(n.input[3:5])
        self._keys = {}
        for index, init in enumerate(self.graph.initializer):
            arr = numpy_helper.to_array(init)
            key = _key(init.name, index)
            self._keys[init.name] = key
            if arr.dtype.kind == "f":
                t = torch.from_numpy(np.array(arr, dtype=np.float64)).to(dtype)
                if init.name in bn_stats:
                    self.register_buffer(key, t)
                else:
                    setattr(self, key, torch.nn.Parameter(t))
            else:
                self.register_buffer(key, torch.from_numpy(np.array(arr)))

    def param(self, name):
        return getattr(self, self._keys[name])

    def named_onnx_parameters(self):
        """(ONNX initializer name, nn.Parameter) for every float initializer that is not a BN statistic."""
        for name, key in self._keys.items():
            v = getattr(self, key)
            if isinstance(v, torch.nn.Parameter):
                yield name, v

    def forward(self, feeds):
        env = {"": None}
        for name, key in self._keys.items():
            env[name] = getattr(self, key)
        for name, value in feeds.items():
            t = torch.as_tensor(value)
            env[name] = t.to(self.dtype) if t.is_floating_point() else t
        for node in self.graph.node:
            fn = getattr(self, "op_" + node.op_type, None)
            if fn is None:
                raise NotImplementedError("onnx_torch: op %s (node '%s') is not supported" % (node.op_type, node.name))
            ins = [env[i] if i else None for i in node.input]
            outs = fn(ins, _attrs(node), node)
            if not isinstance(outs, (list, tuple)):
                outs = [outs]
            for name, value in zip(node.output, outs):
                if name:
                    env[name] = value
        return {o.name: env[o.name] for o in self.graph.output}

    # ---- helpers ----

    def _tensor(self, arr):
        t = torch.from_numpy(np.array(arr))
        return t.to(self.dtype) if t.is_floating_point() else t

    def _cast(self, x, to):
        if to in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16):
            return x.to(self.dtype)
        if to not in _ONNX_TO_TORCH:
            raise NotImplementedError("onnx_torch: Cast to %d" % to)
        return x.to(_ONNX_TO_TORCH[to])

    @staticmethod
    def _pads_symmetric(pads, n):
        begin, end = pads[:n], pads[n:]
        return begin == end, begin

    # ---- neural-network ops ----

    def op_Conv(self, ins, a, node):
        x, w = ins[0], ins[1]
        b = ins[2] if len(ins) > 2 else None
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise NotImplementedError("onnx_torch: Conv auto_pad (node '%s')" % node.name)
        nd = w.dim() - 2
        pads = list(a.get("pads", [0] * 2 * nd))
        sym, begin = self._pads_symmetric(pads, nd)
        if not sym:
            pad = []
            for i in reversed(range(nd)):
                pad += [pads[i], pads[i + nd]]
            x, begin = F.pad(x, pad), [0] * nd
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nd]
        return conv(x, w, b, stride=a.get("strides", [1] * nd), padding=begin,
                    dilation=a.get("dilations", [1] * nd), groups=a.get("group", 1))

    def op_BatchNormalization(self, ins, a, node):
        x, scale, bias, mean, var = ins
        eps = a.get("epsilon", 1e-5)
        momentum = a.get("momentum", 0.9)
        if self.bn_training or a.get("training_mode", 0):
            rm, rv = mean.detach().clone(), var.detach().clone()
            y = F.batch_norm(x, rm, rv, scale, bias, training=True, momentum=1.0 - momentum, eps=eps)
            return [y, rm, rv]
        return [F.batch_norm(x, mean, var, scale, bias, training=False, eps=eps)]

    def op_Relu(self, ins, a, node):
        return F.relu(ins[0])

    def op_MaxPool(self, ins, a, node):
        k = a["kernel_shape"]
        nd = len(k)
        pads = list(a.get("pads", [0] * 2 * nd))
        sym, begin = self._pads_symmetric(pads, nd)
        if not sym or nd != 2 or a.get("storage_order", 0):
            raise NotImplementedError("onnx_torch: MaxPool with asymmetric pads (node '%s')" % node.name)
        return F.max_pool2d(ins[0], k, stride=a.get("strides", [1] * nd), padding=begin,
                            dilation=a.get("dilations", [1] * nd), ceil_mode=bool(a.get("ceil_mode", 0)))

    def op_AveragePool(self, ins, a, node):
        k = a["kernel_shape"]
        pads = list(a.get("pads", [0] * 2 * len(k)))
        sym, begin = self._pads_symmetric(pads, len(k))
        if not sym or len(k) != 2:
            raise NotImplementedError("onnx_torch: AveragePool with asymmetric pads (node '%s')" % node.name)
        return F.avg_pool2d(ins[0], k, stride=a.get("strides", [1] * len(k)), padding=begin,
                            ceil_mode=bool(a.get("ceil_mode", 0)),
                            count_include_pad=bool(a.get("count_include_pad", 0)))

    def op_GlobalAveragePool(self, ins, a, node):
        x = ins[0]
        return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)

    def op_Flatten(self, ins, a, node):
        x = ins[0]
        axis = a.get("axis", 1)
        if axis < 0:
            axis += x.dim()
        lead = int(np.prod(x.shape[:axis])) if axis else 1
        return x.reshape(lead, -1)

    def op_Gemm(self, ins, a, node):
        A, B = ins[0], ins[1]
        C = ins[2] if len(ins) > 2 else None
        if a.get("transA", 0):
            A = A.t()
        if a.get("transB", 0):
            B = B.t()
        y = a.get("alpha", 1.0) * (A @ B)
        if C is not None:
            y = y + a.get("beta", 1.0) * C
        return y

    def op_MatMul(self, ins, a, node):
        return torch.matmul(ins[0], ins[1])

    def op_Softmax(self, ins, a, node):
        return torch.softmax(ins[0], dim=a.get("axis", -1))

    def op_LogSoftmax(self, ins, a, node):
        return torch.log_softmax(ins[0], dim=a.get("axis", -1))

    def op_LayerNormalization(self, ins, a, node):
        x, w = ins[0], ins[1]
        b = ins[2] if len(ins) > 2 else None
        axis = a.get("axis", -1)
        if axis < 0:
            axis += x.dim()
        if len(node.output) > 1 and any(node.output[1:]):
            raise NotImplementedError("onnx_torch: LayerNormalization Mean/InvStdDev outputs (node '%s')" % node.name)
        return F.layer_norm(x, tuple(x.shape[axis:]), w, b, eps=a.get("epsilon", 1e-5))

    def op_Resize(self, ins, a, node):
        x = ins[0]
        scales = ins[2] if len(ins) > 2 else None
        sizes = ins[3] if len(ins) > 3 else None
        mode = a.get("mode", b"nearest").decode()
        ctm = a.get("coordinate_transformation_mode", b"half_pixel").decode()
        if a.get("axes") is not None:
            raise NotImplementedError("onnx_torch: Resize axes (node '%s')" % node.name)
        nd = x.dim() - 2
        if mode == "linear" and ctm in ("half_pixel", "pytorch_half_pixel", "align_corners"):
            tmode = {1: "linear", 2: "bilinear", 3: "trilinear"}[nd]
            align = ctm == "align_corners"
        elif mode == "nearest" and ctm == "asymmetric" and a.get("nearest_mode", b"round_prefer_floor") == b"floor":
            tmode, align = "nearest", None
        else:
            raise NotImplementedError("onnx_torch: Resize mode %s / %s (node '%s')" % (mode, ctm, node.name))
        if sizes is not None and sizes.numel():
            return F.interpolate(x, size=_ints(sizes)[2:], mode=tmode, align_corners=align)
        s = [float(v) for v in scales.reshape(-1).tolist()]
        if s[0] != 1.0 or s[1] != 1.0:
            raise NotImplementedError("onnx_torch: Resize over batch/channel (node '%s')" % node.name)
        # ONNX: out = floor(in * scale), and the coordinate map uses the given scale, as torch does
        # with recompute_scale_factor=False.
        return F.interpolate(x, scale_factor=s[2:], mode=tmode, align_corners=align, recompute_scale_factor=False)

    def op_Dropout(self, ins, a, node):
        training = ins[2] if len(ins) > 2 else None
        ratio = float(ins[1]) if len(ins) > 1 and ins[1] is not None else 0.5
        if training is not None and bool(training) and ratio != 0.0:  # ratio 0: the identity either way
            raise NotImplementedError("onnx_torch: Dropout in training mode (node '%s')" % node.name)
        x = ins[0]
        return [x, torch.ones_like(x, dtype=torch.bool)]

    # ---- elementwise ----

    def op_Add(self, ins, a, node):
        return ins[0] + ins[1]

    def op_Sub(self, ins, a, node):
        return ins[0] - ins[1]

    def op_Mul(self, ins, a, node):
        return ins[0] * ins[1]

    def op_Div(self, ins, a, node):
        x, y = ins
        if not x.is_floating_point():
            return torch.div(x, y, rounding_mode="trunc")
        return x / y

    def op_Pow(self, ins, a, node):
        return torch.pow(ins[0], ins[1])

    def op_Sqrt(self, ins, a, node):
        return torch.sqrt(ins[0])

    def op_Erf(self, ins, a, node):
        return torch.erf(ins[0])

    def op_Tanh(self, ins, a, node):
        return torch.tanh(ins[0])

    def op_Sigmoid(self, ins, a, node):
        return torch.sigmoid(ins[0])

    def op_HardSigmoid(self, ins, a, node):
        return torch.clamp(a.get("alpha", 0.2) * ins[0] + a.get("beta", 0.5), 0.0, 1.0)

    def op_HardSwish(self, ins, a, node):
        return F.hardswish(ins[0])  # x * max(0, min(1, x / 6 + 1 / 2)), PyTorch's values at the kinks

    def op_Mod(self, ins, a, node):
        return torch.fmod(ins[0], ins[1]) if a.get("fmod", 0) else torch.remainder(ins[0], ins[1])

    def op_Exp(self, ins, a, node):
        return torch.exp(ins[0])

    def op_Log(self, ins, a, node):
        return torch.log(ins[0])

    def op_Neg(self, ins, a, node):
        return -ins[0]

    def op_Abs(self, ins, a, node):
        return torch.abs(ins[0])

    def op_Reciprocal(self, ins, a, node):
        return 1.0 / ins[0]

    def op_Identity(self, ins, a, node):
        return ins[0]

    def op_Where(self, ins, a, node):
        return torch.where(ins[0].bool(), ins[1], ins[2])

    def op_Equal(self, ins, a, node):
        return torch.eq(ins[0], ins[1])

    def op_Less(self, ins, a, node):
        return torch.lt(ins[0], ins[1])

    def op_Greater(self, ins, a, node):
        return torch.gt(ins[0], ins[1])

    def op_Not(self, ins, a, node):
        return torch.logical_not(ins[0])

    def op_And(self, ins, a, node):
        return torch.logical_and(ins[0], ins[1])

    def op_Cast(self, ins, a, node):
        return self._cast(ins[0], a["to"])

    def op_Trilu(self, ins, a, node):
        k = int(ins[1]) if len(ins) > 1 and ins[1] is not None else 0
        return torch.triu(ins[0], k) if a.get("upper", 1) else torch.tril(ins[0], k)

    # ---- reductions ----

    def _reduce(self, fn, ins, a, axes_from_input):
        x = ins[0]
        if axes_from_input:
            axes = _ints(ins[1]) if len(ins) > 1 and ins[1] is not None else []
        else:
            axes = list(a.get("axes", []))
        keep = bool(a.get("keepdims", 1))
        if not axes:
            if a.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.dim()))
        return fn(x, dim=tuple(axes), keepdim=keep)

    def op_ReduceMean(self, ins, a, node):
        return self._reduce(torch.mean, ins, a, len(ins) > 1)

    def op_ReduceSum(self, ins, a, node):
        return self._reduce(torch.sum, ins, a, True)

    # ---- shapes and movement ----

    def op_Reshape(self, ins, a, node):
        x = ins[0]
        shape = _ints(ins[1])
        if not a.get("allowzero", 0):
            shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
        return x.reshape(shape)

    def op_Transpose(self, ins, a, node):
        x = ins[0]
        perm = a.get("perm", list(reversed(range(x.dim()))))
        return x.permute(*perm)

    def op_Split(self, ins, a, node):
        x = ins[0]
        axis = a.get("axis", 0)
        n = len(node.output)
        if len(ins) > 1 and ins[1] is not None:
            split = _ints(ins[1])
        elif "split" in a:
            split = list(a["split"])
        else:
            d = x.shape[axis]
            split = [(d + n - 1) // n] * (n - 1)
            split.append(d - sum(split))
        return list(torch.split(x, split, dim=axis))

    def op_Concat(self, ins, a, node):
        return torch.cat([t for t in ins if t is not None], dim=a["axis"])

    def op_Gather(self, ins, a, node):
        data, idx = ins
        axis = a.get("axis", 0)
        if axis < 0:
            axis += data.dim()
        d = data.shape[axis]
        idx = idx.long()
        flat = torch.where(idx < 0, idx + d, idx).reshape(-1)
        out = data.index_select(axis, flat)
        return out.reshape(tuple(data.shape[:axis]) + tuple(idx.shape) + tuple(data.shape[axis + 1:]))

    def op_Slice(self, ins, a, node):
        x = ins[0]
        starts, ends = _ints(ins[1]), _ints(ins[2])
        axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        for s, e, ax, st in zip(starts, ends, axes, steps):
            if st == 0:
                raise NotImplementedError("onnx_torch: Slice with step 0 (node '%s')" % node.name)
            dim = x.shape[ax]
            s = s + dim if s < 0 else s
            e = e + dim if e < 0 else e
            # ONNX's clamping: [0, dim] for a positive step, [-1, dim - 1] for a negative one
            s = max(0, min(dim, s)) if st > 0 else max(-1, min(dim - 1, s))
            e = max(0, min(dim, e)) if st > 0 else max(-1, min(dim - 1, e))
            idx = torch.arange(s, e, st, dtype=torch.long)
            x = x.index_select(ax if ax >= 0 else ax + x.dim(), idx)
        return x

    def op_Unsqueeze(self, ins, a, node):
        x = ins[0]
        axes = _ints(ins[1]) if len(ins) > 1 else list(a["axes"])
        r = x.dim() + len(axes)
        for ax in sorted(v + r if v < 0 else v for v in axes):
            x = x.unsqueeze(ax)
        return x

    def op_Squeeze(self, ins, a, node):
        x = ins[0]
        if len(ins) > 1 and ins[1] is not None:
            axes = _ints(ins[1])
        else:
            axes = list(a.get("axes", [i for i, d in enumerate(x.shape) if d == 1]))
        for ax in sorted((v + x.dim() if v < 0 else v for v in axes), reverse=True):
            x = x.squeeze(ax)
        return x

    def op_Pad(self, ins, a, node):
        x, pads = ins[0], [int(v) for v in ins[1].tolist()]
        value = float(ins[2].item()) if len(ins) > 2 and ins[2] is not None else 0.0
        if len(ins) > 3 and ins[3] is not None:
            raise NotImplementedError("onnx_torch: Pad with axes (node '%s')" % node.name)
        mode = a.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        n = x.dim()
        pad = []
        for i in reversed(range(n)):
            pad += [pads[i], pads[i + n]]
        if mode == "constant":
            return F.pad(x, pad, value=value)
        if mode in ("reflect", "edge"):
            lead = next((i for i in range(n) if pads[i] or pads[i + n]), n)
            pad = pad[:2 * (n - lead)]  # torch pads the trailing dims only
            return F.pad(x, pad, mode="reflect" if mode == "reflect" else "replicate")
        raise NotImplementedError("onnx_torch: Pad mode %s (node '%s')" % (mode, node.name))

    def op_ScatterND(self, ins, a, node):
        data, idx, upd = ins
        if a.get("reduction", b"none") not in (b"none", "none"):
            raise NotImplementedError("onnx_torch: ScatterND reduction (node '%s')" % node.name)
        out = data.clone()
        k = idx.shape[-1]
        flat = idx.reshape(-1, k).long()
        vals = upd.reshape((flat.shape[0],) + tuple(data.shape[k:]))
        out[tuple(flat[:, j] for j in range(k))] = vals
        return out

    def op_Expand(self, ins, a, node):
        x = ins[0]
        shape = torch.broadcast_shapes(tuple(x.shape), tuple(_ints(ins[1])))
        return x.expand(shape)

    def op_Shape(self, ins, a, node):
        dims = list(ins[0].shape)
        start, end = a.get("start", 0), a.get("end", len(dims))
        return torch.tensor(dims[start:end], dtype=torch.int64)

    def op_Constant(self, ins, a, node):
        if "value" in a:
            return self._tensor(numpy_helper.to_array(a["value"]))
        for k, dt in (("value_float", np.float32), ("value_int", np.int64),
                      ("value_floats", np.float32), ("value_ints", np.int64)):
            if k in a:
                return self._tensor(np.array(a[k], dtype=dt))
        raise NotImplementedError("onnx_torch: Constant attribute %s (node '%s')" % (list(a), node.name))

    def op_ConstantOfShape(self, ins, a, node):
        shape = _ints(ins[0])
        value = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1, np.float32)
        v = self._tensor(value.reshape(-1)[:1])
        return v.reshape(()).expand(shape).clone()

    def op_Range(self, ins, a, node):
        start, limit, delta = ins
        dt = start.dtype
        return torch.arange(start.item(), limit.item(), delta.item(), dtype=dt)
