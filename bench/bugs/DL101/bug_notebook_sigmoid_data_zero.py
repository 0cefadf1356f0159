# source: https://github.com/KangPeng-Ren/python-base
# category: DL101
# expect: flag 27, 34
# evidence: after zeroing the sigmoid output through its .data alias, backward() runs without error and x1.grad is all zeros instead of sigmoid'(x1).
import torch

# In[1]: two identical leaves for the comparison
x1 = torch.tensor([1.0, 2, 3], requires_grad=True)
x2 = torch.tensor([1.0, 2, 3], requires_grad=True)
print(x1)
print(x2)

# In[2]: same activation on both
y1 = x1.sigmoid()
y2 = x2.sigmoid()
print(y1)
print(y2)

# In[3]: reference gradient from the untouched graph
y2.sum().backward()
reference_grad = x2.grad.clone()
print(reference_grad)


def take_values(y):
    # the notebook's "detach() vs data" cell: grab the values without the graph
    z1 = y.data
    print(z1, z1.requires_grad)
    return z1


# In[4]: reuse the buffer as scratch space
z1 = take_values(y1)
z1.zero_()
print("y1 after z1.zero_():", y1)

# In[5]: backward through y1, whose saved output was overwritten behind autograd
y1.sum().backward()
print("x1.grad:", x1.grad)


if __name__ == "__main__":
    torch.manual_seed(0)
    with torch.no_grad():
        expected = torch.sigmoid(x1) * (1 - torch.sigmoid(x1))
        assert torch.allclose(reference_grad, expected, atol=1e-6)
        assert torch.equal(x1.grad, torch.zeros(3)), x1.grad
        assert not torch.allclose(x1.grad, reference_grad)
    print("evidence holds: the .data in-place zero_ silently turned the sigmoid gradient into zeros (no error raised)")
