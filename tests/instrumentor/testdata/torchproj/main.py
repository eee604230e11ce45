"""TorchScript functions stay scriptable and torch.compile still sees one graph after instrumentation."""
import torch


@torch.jit.script
def scripted(x: torch.Tensor) -> torch.Tensor:
    for _ in range(2):
        x = x + 1
    return x


def body(x):
    y = x * 2
    for i in range(3):
        y = y + i
    return torch.relu(y)


def main():
    x = torch.arange(4.0)
    compiled = torch.compile(body, fullgraph=True, backend="eager")
    print("compiled_same:", torch.equal(compiled(x), body(x)))
    print("scripted:", scripted(x).tolist())
    print("instrumented:", "__sp_on__" in globals())


main()
