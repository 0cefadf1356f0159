# source: https://www.codeprj.com/zh/blog/d5dc711.html
# category: DL204
# expect: flag 14
# evidence: c = out.detach() shares storage and version counter with the sigmoid output; c.zero_() bumps the version, so out.sum().backward() raises "modified by an inplace operation ... output 0 of Sigmoid".
import torch

a = torch.tensor([1, 2, 3.], requires_grad=True)
out = a.sigmoid()
print(out)  # tensor([0.7311, 0.8808, 0.9526], grad_fn=<SigmoidBackward>)
c = out.detach()
print(c)  # tensor([0.7311, 0.8808, 0.9526])

# in-place change of the detached copy c (its data is shared with out)
c.zero_()
print(c, out)

if __name__ == "__main__":
    try:
        out.sum().backward()
    except RuntimeError as e:
        msg = str(e)
        assert "modified by an inplace operation" in msg and "Sigmoid" in msg, msg
        assert torch.equal(out.detach(), torch.zeros(3))
        print("evidence holds: zeroing the detached alias made out.sum().backward() raise the inplace error")
    else:
        raise AssertionError("backward did not raise")
