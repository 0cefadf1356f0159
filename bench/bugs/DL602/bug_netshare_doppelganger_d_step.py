# source: https://github.com/netsharecmu/NetShare/issues/39
# category: DL602
# expect: flag 57, 64
# evidence: in the discriminator round the generator's packed fake features are fed to the discriminator without detach, so dis_loss.backward(retain_graph=True) writes non-zero gradients into every generator parameter.
import torch
import torch.nn as nn


class DoppelGANgerGenerator(nn.Module):
    def __init__(self, noise_dim=4, attr_dim=3, feat_dim=2, seq_len=5):
        super().__init__()
        self.attr_net = nn.Linear(noise_dim, attr_dim)
        self.feature_net = nn.Linear(noise_dim + attr_dim, feat_dim * seq_len)
        self.seq_len, self.feat_dim = seq_len, feat_dim

    def forward(self, real_attribute_noise, addi_attribute_noise, feature_input_noise):
        attribute = torch.sigmoid(self.attr_net(real_attribute_noise + addi_attribute_noise))
        feature = self.feature_net(torch.cat([feature_input_noise, attribute], dim=1))
        return attribute, attribute.round(), feature.view(-1, self.seq_len, self.feat_dim)


class Discriminator(nn.Module):
    def __init__(self, in_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, feature, attribute):
        return self.net(torch.cat([feature.flatten(1), attribute], dim=1))


class DoppelGANger:
    def __init__(self, batch_size=8, num_packing=1, d_rounds=1, g_rounds=1):
        self.batch_size, self.num_packing = batch_size, num_packing
        self.d_rounds, self.g_rounds = d_rounds, g_rounds
        self.generator = DoppelGANgerGenerator()
        self.discriminator = Discriminator(5 * 2 + 3)
        self.opt_generator = torch.optim.Adam(self.generator.parameters(), lr=1e-3)
        self.opt_discriminator = torch.optim.Adam(self.discriminator.parameters(), lr=1e-3)

    def train(self, loader):
        for batch_idx, (real_attribute, real_feature) in enumerate(loader):
            real_attribute_noise = torch.randn(self.batch_size, 4)
            addi_attribute_noise = torch.randn(self.batch_size, 4)
            feature_input_noise = torch.randn(self.batch_size, 4)

            for _ in range(self.d_rounds):
                fake_attribute_list, fake_feature_list = [], []
                for _ in range(self.num_packing):
                    fake_attribute, _, fake_feature = self.generator(
                        real_attribute_noise, addi_attribute_noise, feature_input_noise)
                    fake_attribute_list.append(fake_attribute)
                    fake_feature_list.append(fake_feature)
                packed_fake_attribute = torch.cat(fake_attribute_list, dim=1)
                packed_fake_feature = torch.cat(fake_feature_list, dim=1)

                dis_real = self.discriminator(real_feature, real_attribute)
                dis_fake = self.discriminator(packed_fake_feature, packed_fake_attribute)

                dis_loss_fake = torch.mean(dis_fake)
                dis_loss_real = -torch.mean(dis_real)
                dis_loss = dis_loss_fake + dis_loss_real

                self.opt_discriminator.zero_grad(set_to_none=False)
                dis_loss.backward(retain_graph=True)
                self.opt_discriminator.step()

            for _ in range(self.g_rounds):
                dis_fake = self.discriminator(packed_fake_feature, packed_fake_attribute)
                gen_loss = -torch.mean(dis_fake)
                self.opt_generator.zero_grad(set_to_none=False)
                gen_loss.backward()
                self.opt_generator.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = DoppelGANger()
    loader = [(torch.rand(8, 3), torch.randn(8, 5, 2))]

    leaked = []
    d_step = model.opt_discriminator.step

    def spy_step(*a, **k):
        leaked.append(sum(p.grad.abs().sum().item() for p in model.generator.parameters()
                          if p.grad is not None))
        return d_step(*a, **k)

    model.opt_discriminator.step = spy_step
    model.train(loader)

    assert leaked and leaked[0] > 0.0, "discriminator loss backpropagated into the generator"
    print("evidence holds: generator grad mass after the D-step backward = %.4f" % leaked[0])
