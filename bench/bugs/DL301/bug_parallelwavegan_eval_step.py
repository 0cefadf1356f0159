# source: https://github.com/kan-bayashi/ParallelWaveGAN/pull/26
# category: DL301
# expect: flag 59, 60, 67, 68, 92, 94
# evidence: Trainer._eval_epoch puts generator and discriminator in eval mode and calls _eval_step per dev batch with grad enabled: the generated waveforms and discriminator outputs carry grad_fns and autograd saves activations
from collections import defaultdict

import torch
import torch.nn as nn


class Generator(nn.Module):
    def __init__(self, aux_channels=4, channels=8, upsample=4):
        super().__init__()
        self.upsample = nn.Upsample(scale_factor=upsample)
        self.first = nn.Conv1d(1 + aux_channels, channels, 3, padding=1)
        self.last = nn.Sequential(nn.ReLU(), nn.Conv1d(channels, 1, 1))

    def forward(self, z, c):
        return self.last(self.first(torch.cat([z, self.upsample(c)], dim=1)))


class Discriminator(nn.Module):
    def __init__(self, channels=8):
        super().__init__()
        self.layers = nn.Sequential(nn.Conv1d(1, channels, 3, padding=1), nn.LeakyReLU(0.2),
                                    nn.Conv1d(channels, 1, 3, padding=1))

    def forward(self, x):
        return self.layers(x)


class STFTLoss(nn.Module):
    def forward(self, y_hat, y):
        mag = lambda s: torch.stft(s.squeeze(1), n_fft=16, hop_length=4, return_complex=True).abs()
        sc = torch.norm(mag(y) - mag(y_hat)) / torch.norm(mag(y))
        mag_loss = nn.functional.l1_loss(torch.log(mag(y) + 1e-7), torch.log(mag(y_hat) + 1e-7))
        return sc, mag_loss


class Trainer(object):
    def __init__(self, steps, data_loader, model, criterion, config, device=torch.device("cpu")):
        self.steps = steps
        self.data_loader = data_loader
        self.model = model
        self.criterion = criterion
        self.config = config
        self.device = device
        self.total_eval_loss = defaultdict(float)
        self.intermediate_results = []

    def _eval_step(self, batch):
        """Evaluate model one step."""
        # parse batch
        x, y = batch
        x = tuple([x_.to(self.device) for x_ in x])
        y = y.to(self.device)

        # generator
        y_ = self.model["generator"](*x)
        p_ = self.model["discriminator"](y_)
        adv_loss = self.criterion["mse"](p_, p_.new_ones(p_.size()))
        sc_loss, mag_loss = self.criterion["stft"](y_, y)
        aux_loss = sc_loss + mag_loss
        gen_loss = aux_loss + self.config["lambda_adv"] * adv_loss

        # discriminator
        p = self.model["discriminator"](y)
        p_ = self.model["discriminator"](y_)
        real_loss = self.criterion["mse"](p, p.new_ones(p.size()))
        fake_loss = self.criterion["mse"](p_, p_.new_zeros(p_.size()))
        dis_loss = real_loss + fake_loss

        # add to total eval loss
        self.total_eval_loss["eval/adversarial_loss"] += adv_loss.item()
        self.total_eval_loss["eval/generator_loss"] += gen_loss.item()
        self.total_eval_loss["eval/discriminator_loss"] += dis_loss.item()

    @torch.no_grad()
    def _genearete_and_save_intermediate_result(self, batch):
        x_batch, y_batch = batch
        y_batch_ = self.model["generator"](*x_batch)
        self.intermediate_results.append(float(y_batch_.abs().mean()))

    def _eval_epoch(self):
        """Evaluate model one epoch."""
        print(f"(Steps: {self.steps}) Start evaluation.")
        # change mode
        for key in self.model.keys():
            self.model[key].eval()

        # calculate loss for each batch
        for eval_steps_per_epoch, batch in enumerate(self.data_loader["dev"], 1):
            # eval one step
            self._eval_step(batch)

            # save intermediate result
            if eval_steps_per_epoch == 1:
                self._genearete_and_save_intermediate_result(batch)

        # average loss
        for key in self.total_eval_loss.keys():
            self.total_eval_loss[key] /= eval_steps_per_epoch
            print(f"(Steps: {self.steps}) {key} = {self.total_eval_loss[key]:.4f}.")

        # restore mode
        for key in self.model.keys():
            self.model[key].train()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = {"generator": Generator(), "discriminator": Discriminator()}
    criterion = {"mse": nn.MSELoss(), "stft": STFTLoss()}
    dev = [((torch.randn(2, 1, 64), torch.randn(2, 4, 16)), torch.randn(2, 1, 64)) for _ in range(3)]
    trainer = Trainer(0, {"dev": dev}, model, criterion, {"lambda_adv": 4.0})
    gen_outputs, dis_outputs = [], []
    model["generator"].register_forward_hook(lambda m, i, o: gen_outputs.append(o))
    model["discriminator"].register_forward_hook(lambda m, i, o: dis_outputs.append(o))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        trainer._eval_epoch()
    assert len(gen_outputs) == 4 and sum(o.grad_fn is not None for o in gen_outputs) == 3
    assert all(o.grad_fn is not None for o in dis_outputs)
    assert sum(saved) > 0
    print("evidence holds: during _eval_epoch %d of 4 generator and %d discriminator outputs carry grad_fns; %d bytes saved"
          % (sum(o.grad_fn is not None for o in gen_outputs), len(dis_outputs), sum(saved)))
