# source: https://github.com/Michedev/VAE_anomaly_detection/issues/10
# category: DL206
# expect: flag 87
# evidence: with the model moved to another device ("meta" stands in for cuda on this CPU-only run), TrainStep leaves the batch where it was because the result of x.to(self.device) is discarded, and the first forward raises a device-mismatch RuntimeError.
"""
VAE.py (VAEAnomaly, tabular_encoder/decoder, shrunk) and train.py (TrainStep, train) with a minimal
stand-in for ignite's Engine; logging/tensorboard/checkpoint handlers are left out, and opt.zero_grad()
is added so that the step has no second, unrelated problem.
"""
import argparse

import torch
from torch import nn
from torch.distributions import Normal, kl_divergence
from torch.nn.functional import softplus


def tabular_encoder(input_size: int, latent_size: int):
    return nn.Sequential(nn.Linear(input_size, 50), nn.ReLU(), nn.Linear(50, 20), nn.ReLU(),
                         nn.Linear(20, latent_size * 2))


def tabular_decoder(latent_size: int, output_size: int):
    return nn.Sequential(nn.Linear(latent_size, 20), nn.ReLU(), nn.Linear(20, 50), nn.ReLU(),
                         nn.Linear(50, output_size * 2))


class VAEAnomaly(nn.Module):
    def __init__(self, input_size: int, latent_size: int, L=10):
        super().__init__()
        self.L = L
        self.input_size = input_size
        self.latent_size = latent_size
        self.encoder = tabular_encoder(input_size, latent_size)
        self.decoder = tabular_decoder(latent_size, input_size)
        self.prior = Normal(0, 1)

    def forward(self, x):
        pred_result = self.predict(x)
        x = x.unsqueeze(0)  # unsqueeze to broadcast input across sample dimension (L)
        log_lik = Normal(pred_result['recon_mu'], pred_result['recon_sigma']).log_prob(x).mean(dim=0)
        log_lik = log_lik.mean(dim=0).sum()
        kl = kl_divergence(pred_result['latent_dist'], self.prior).mean(dim=0).sum()
        loss = kl - log_lik
        return dict(loss=loss, kl=kl, recon_loss=log_lik, **pred_result)

    def predict(self, x) -> dict:
        batch_size = len(x)
        latent_mu, latent_sigma = self.encoder(x).chunk(2, dim=1)
        latent_sigma = softplus(latent_sigma)
        dist = Normal(latent_mu, latent_sigma)
        z = dist.rsample([self.L])  # shape: [L, batch_size, latent_size]
        z = z.view(self.L * batch_size, self.latent_size)
        recon_mu, recon_sigma = self.decoder(z).chunk(2, dim=1)
        recon_sigma = softplus(recon_sigma)
        recon_mu = recon_mu.view(self.L, *x.shape)
        recon_sigma = recon_sigma.view(self.L, *x.shape)
        return dict(latent_dist=dist, latent_mu=latent_mu, latent_sigma=latent_sigma, recon_mu=recon_mu,
                    recon_sigma=recon_sigma, z=z)


class Engine:
    """Just enough of ignite.engine.Engine for this script."""

    def __init__(self, process_function):
        self._process_function = process_function
        self.state = argparse.Namespace(iteration=0, epoch=0, output=None)

    def run(self, data, max_epochs=1):
        for _ in range(max_epochs):
            self.state.epoch += 1
            for batch in data:
                self.state.iteration += 1
                self.state.output = self._process_function(self, batch)
        return self.state


class TrainStep:

    def __init__(self, model, opt, device=None):
        self.model = model
        self.opt = opt
        self.device = device

    def __call__(self, engine, batch):
        x = batch[0]
        if self.device: x.to(self.device)
        self.opt.zero_grad()
        pred_output = self.model(x)
        pred_output['loss'].backward()
        self.opt.step()
        return pred_output


def train(model, opt, dloader, epochs: int, experiment_folder, device, args):
    step = TrainStep(model, opt, device)
    trainer = Engine(step)
    trainer.run(dloader, epochs)


if __name__ == "__main__":
    torch.manual_seed(0)
    args = argparse.Namespace(input_size=6, latent_size=2, num_resamples=4, epochs=1, batch_size=8,
                              device='meta', lr=1e-4)
    dloader = [(torch.randn(args.batch_size, args.input_size),) for _ in range(3)]

    # on the real device the model trains; this is the same step with the model where the data is
    cpu_model = VAEAnomaly(args.input_size, args.latent_size, args.num_resamples)
    cpu_opt = torch.optim.Adam(cpu_model.parameters(), args.lr)
    train(cpu_model, cpu_opt, dloader, args.epochs, None, 'cpu', args)

    model = VAEAnomaly(args.input_size, args.latent_size, args.num_resamples).to(args.device)
    opt = torch.optim.Adam(model.parameters(), args.lr)
    try:
        train(model, opt, dloader, args.epochs, None, args.device, args)
        raised = None
    except (RuntimeError, NotImplementedError) as e:
        raised = str(e)
    assert raised is not None and "meta" in raised and "cpu" in raised, raised
    assert dloader[0][0].device.type == "cpu"
    print("evidence holds: the batch never left the CPU:", raised.splitlines()[0])
