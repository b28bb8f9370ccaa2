"""PyTorch eager baseline for tools/gpu-check.sh: the same top-k SwiGLU MoE
layer (f32) on the GPU; prints the median milliseconds of REPEAT runs, or
exits non-zero when torch or a GPU is missing.

usage: torch_moe.py T D H E K REPEAT
"""
import sys


def main():
    T, D, H, E, K, repeat = map(int, sys.argv[1:7])
    import torch  # noqa: E402  (absent on most machines: the caller prints n/a)
    if not torch.cuda.is_available():
        sys.exit("no CUDA device for torch")
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(1)
    x = torch.randn(T, D, device=dev, generator=g)
    wr = torch.randn(D, E, device=dev, generator=g) / D ** 0.5
    w1 = torch.randn(E, D, 2 * H, device=dev, generator=g) / D ** 0.5
    w2 = torch.randn(E, H, D, device=dev, generator=g) / H ** 0.5

    def layer():
        logits = x @ wr
        top, idx = torch.topk(logits, K, dim=-1)
        w = torch.softmax(top, dim=-1)
        y = torch.zeros_like(x)
        for e in range(E):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            u = x[tok] @ w1[e]
            h = torch.nn.functional.silu(u[:, :H]) * u[:, H:]
            y.index_add_(0, tok, (h @ w2[e]) * w[tok, slot, None])
        return y

    layer()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        layer()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    print(f"{times[len(times) // 2]:.3f}")


if __name__ == "__main__":
    main()
