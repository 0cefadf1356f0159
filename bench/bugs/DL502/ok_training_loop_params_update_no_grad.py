# source: https://www.greghilston.com/post/2_autograd/
# category: DL502
# expect: clean
# evidence: training_loop updates the leaf params in place with params -= learning_rate * params.grad inside torch.no_grad(), so no error is raised, params keep requires_grad and the loss falls.
import torch

torch.manual_seed(0)

t_c = torch.tensor([0.5, 14.0, 15.0, 28.0, 11.0, 8.0,
                    3.0, -4.0, 6.0, 13.0, 21.0])
t_u = torch.tensor([35.7, 55.9, 58.2, 81.9, 56.3, 48.9,
                    33.9, 21.8, 48.4, 60.4, 68.4])
t_un = 0.1 * t_u


def model(t_u, w, b):
    return w * t_u + b


def loss_fn(t_p, t_c):
    squared_diffs = (t_p - t_c) ** 2
    return squared_diffs.mean()


def training_loop(n_epochs, learning_rate, params, t_u, t_c):
    losses = []
    for epoch in range(1, n_epochs + 1):
        if params.grad is not None:
            params.grad.zero_()

        t_p = model(t_u, *params)
        loss = loss_fn(t_p, t_c)
        loss.backward()

        with torch.no_grad():
            params -= learning_rate * params.grad

        losses.append(loss.item())
    return params, losses


if __name__ == "__main__":
    params = torch.tensor([1.0, 0.0], requires_grad=True)
    start = params.detach().clone()
    params, losses = training_loop(
        n_epochs=200, learning_rate=1e-2, params=params, t_u=t_un, t_c=t_c)
    assert params.requires_grad and params.is_leaf
    with torch.no_grad():
        assert not torch.equal(start, params)
    assert losses[-1] < losses[0]
    print("evidence holds: in-place update under no_grad trains params (loss %.2f -> %.2f)" % (losses[0], losses[-1]))
