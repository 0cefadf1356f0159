# source: https://github.com/openai/guided-diffusion/blob/main/scripts/classifier_sample.py
# category: DL302
# expect: clean
# evidence: the classifier gradient is taken inside the no_grad sampling loop, but cond_fn re-enables autograd with th.enable_grad() on a fresh leaf, so autograd.grad succeeds while the samples carry no graph.
import numpy as np
import torch as th
import torch.nn as nn
import torch.nn.functional as F

NUM_CLASSES = 3


class GaussianDiffusion:
    def __init__(self, num_timesteps=5):
        self.num_timesteps = num_timesteps
        self.betas = np.linspace(1e-3, 2e-2, num_timesteps)
        self.alphas_cumprod = np.cumprod(1.0 - self.betas)

    def p_mean_variance(self, model, x, t, model_kwargs=None):
        eps = model(x, t, **(model_kwargs or {}))
        a = th.tensor(self.alphas_cumprod[t[0].item()], dtype=x.dtype)
        mean = (x - (1 - a).sqrt() * eps) / a.sqrt()
        variance = th.full_like(x, float(self.betas[t[0].item()]))
        return {"mean": mean, "variance": variance, "log_variance": variance.log()}

    def condition_mean(self, cond_fn, p_mean_var, x, t, model_kwargs=None):
        gradient = cond_fn(x, t, **(model_kwargs or {}))
        return p_mean_var["mean"].float() + p_mean_var["variance"] * gradient.float()

    def p_sample(self, model, x, t, cond_fn=None, model_kwargs=None):
        out = self.p_mean_variance(model, x, t, model_kwargs=model_kwargs)
        noise = th.randn_like(x)
        if cond_fn is not None:
            out["mean"] = self.condition_mean(cond_fn, out, x, t, model_kwargs=model_kwargs)
        nonzero_mask = (t != 0).float().view(-1, *([1] * (len(x.shape) - 1)))
        sample = out["mean"] + nonzero_mask * th.exp(0.5 * out["log_variance"]) * noise
        return {"sample": sample}

    def p_sample_loop_progressive(self, model, shape, cond_fn=None, model_kwargs=None):
        img = th.randn(*shape)
        for i in list(range(self.num_timesteps))[::-1]:
            t = th.tensor([i] * shape[0])
            with th.no_grad():
                out = self.p_sample(model, img, t, cond_fn=cond_fn, model_kwargs=model_kwargs)
                yield out
                img = out["sample"]

    def p_sample_loop(self, model, shape, cond_fn=None, model_kwargs=None):
        final = None
        for sample in self.p_sample_loop_progressive(model, shape, cond_fn=cond_fn, model_kwargs=model_kwargs):
            final = sample
        return final["sample"]


class EpsModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Conv2d(3, 3, 3, padding=1)

    def forward(self, x, t, y=None):
        return self.net(x)


class NoisyClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(4, NUM_CLASSES))

    def forward(self, x, t):
        return self.net(x)


def main(classifier_scale=1.0, batch_size=2, image_size=8):
    model, diffusion = EpsModel(), GaussianDiffusion()
    model.eval()
    classifier = NoisyClassifier()
    classifier.eval()
    grad_norms = []

    def cond_fn(x, t, y=None):
        assert y is not None
        with th.enable_grad():
            x_in = x.detach().requires_grad_(True)
            logits = classifier(x_in, t)
            log_probs = F.log_softmax(logits, dim=-1)
            selected = log_probs[range(len(logits)), y.view(-1)]
            grad = th.autograd.grad(selected.sum(), x_in)[0] * classifier_scale
        grad_norms.append(grad.norm().item())
        return grad

    def model_fn(x, t, y=None):
        assert y is not None
        return model(x, t, y)

    classes = th.randint(low=0, high=NUM_CLASSES, size=(batch_size,))
    sample = diffusion.p_sample_loop(model_fn, (batch_size, 3, image_size, image_size),
                                     cond_fn=cond_fn, model_kwargs={"y": classes})
    return sample, grad_norms


if __name__ == "__main__":
    th.manual_seed(0)
    np.random.seed(0)
    sample, grad_norms = main()
    assert len(grad_norms) == 5 and all(g > 0 for g in grad_norms), grad_norms
    assert sample.grad_fn is None and not sample.requires_grad
    assert th.is_grad_enabled()
    print("evidence holds: 5 classifier-guidance gradients computed under the no_grad sampler "
          "(norms %.3g..%.3g) and the final sample carries no graph" % (min(grad_norms), max(grad_norms)))
