# source: https://github.com/opendp/smartnoise-sdk/issues/280
# category: DL601
# expect: flag 113, 117
# evidence: the student discriminator's .grad at its second iteration equals the first iteration's gradient plus the new one, so optimizerS steps on accumulated stale gradients.
import math

import numpy as np
import torch
import torch.nn as nn
from torch import optim


class Discriminator(nn.Module):
    def __init__(self, input_dim, dis_dims=(8,), pack=1):
        super().__init__()
        dim = input_dim * pack
        self.pack = pack
        self.packdim = dim
        seq = []
        for item in list(dis_dims):
            seq += [nn.Linear(dim, item), nn.LeakyReLU(0.2)]
            dim = item
        seq += [nn.Linear(dim, 1), nn.Sigmoid()]
        self.seq = nn.Sequential(*seq)

    def forward(self, input):
        return self.seq(input.view(-1, self.packdim))


class Generator(nn.Module):
    def __init__(self, embedding_dim, data_dim):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(embedding_dim, 8), nn.ReLU(), nn.Linear(8, data_dim))

    def forward(self, input):
        return self.seq(input)


def pate(data, teachers, lap_scale):
    num_teachers = len(teachers)
    labels = torch.Tensor(num_teachers, data.shape[0]).type(torch.int64)
    for i in range(num_teachers):
        output = teachers[i](data)
        pred = (output > 0.5).type(torch.Tensor).squeeze()
        labels[i] = pred
    votes = torch.sum(labels, dim=0).unsqueeze(1).type(torch.DoubleTensor)
    noise = torch.from_numpy(np.random.laplace(loc=0, scale=1 / lap_scale, size=votes.size()))
    noisy_votes = votes + noise
    noisy_labels = (noisy_votes > num_teachers / 2).type(torch.DoubleTensor)
    return noisy_labels, votes


class PATECTGAN:
    def __init__(self, embedding_dim=4, data_dim=6, num_teachers=3, batch_size=8,
                 teacher_iters=1, student_iters=2, noise_multiplier=1e-3):
        self.embedding_dim = embedding_dim
        self.data_dim = data_dim
        self.num_teachers = num_teachers
        self.batch_size = batch_size
        self.teacher_iters = teacher_iters
        self.student_iters = student_iters
        self.noise_multiplier = noise_multiplier
        self.pack = 1
        self.device = torch.device("cpu")
        self.student_grad_log = []

    def train(self, data, rounds=1):
        self.generator = Generator(self.embedding_dim, self.data_dim).to(self.device)
        teacher_disc = [Discriminator(self.data_dim).to(self.device) for _ in range(self.num_teachers)]
        student_disc = Discriminator(self.data_dim).to(self.device)
        self.student_disc = student_disc

        optimizerG = optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.9))
        optimizerS = optim.Adam(student_disc.parameters(), lr=2e-4, betas=(0.5, 0.9))
        optimizerT = [optim.Adam(teacher_disc[i].parameters(), lr=2e-4, betas=(0.5, 0.9))
                      for i in range(self.num_teachers)]

        data_partitions = np.array_split(data, self.num_teachers)
        mean = torch.zeros(self.batch_size, self.embedding_dim, device=self.device)
        std = mean + 1
        REAL_LABEL = 1
        FAKE_LABEL = 0
        criterion = nn.BCELoss()

        for _ in range(rounds):
            # train teacher discriminators
            for t_2 in range(self.teacher_iters):
                for i in range(self.num_teachers):
                    partition_data = data_partitions[i]
                    idx = np.random.randint(0, len(partition_data), self.batch_size)
                    real = torch.from_numpy(partition_data[idx].astype("float32")).to(self.device)
                    fakez = torch.normal(mean, std=std)
                    fake = self.generator(fakez)

                    optimizerT[i].zero_grad()
                    y_all = torch.cat([teacher_disc[i](fake), teacher_disc[i](real)])
                    label_fake = torch.full((int(self.batch_size / self.pack), 1), FAKE_LABEL, dtype=torch.float, device=self.device)
                    label_true = torch.full((int(self.batch_size / self.pack), 1), REAL_LABEL, dtype=torch.float, device=self.device)
                    labels = torch.cat([label_fake, label_true])
                    errD = criterion(y_all, labels)
                    errD.backward()
                    optimizerT[i].step()

            # train student discriminator
            for t_3 in range(self.student_iters):
                fakez = torch.normal(mean, std=std)
                fake = self.generator(fakez)
                fake_data = fake
                predictions, votes = pate(fake_data, teacher_disc, self.noise_multiplier)

                output = student_disc(fake_data.detach())
                loss_s = criterion(output, predictions.float().to(self.device))
                loss_s.backward()
                self.student_grad_log.append(
                    (student_disc.seq[0].weight.grad.detach().clone(), fake_data.detach().clone(), predictions.float().clone())
                )
                optimizerS.step()

            # train generator
            fakez = torch.normal(mean=mean, std=std)
            fake = self.generator(fakez)
            y_fake = student_disc(fake)
            label_g = torch.full((int(self.batch_size / self.pack), 1), REAL_LABEL, dtype=torch.float, device=self.device)
            loss_g = criterion(y_fake, label_g.float())
            optimizerG.zero_grad()
            loss_g.backward()
            optimizerG.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    data = np.random.rand(48, 6)
    synth = PATECTGAN()
    synth.train(data, rounds=1)
    g1, x1, y1 = synth.student_grad_log[0]
    g2, x2, y2 = synth.student_grad_log[1]
    # gradient that the second student iteration alone should have produced:
    # rerun with the same seeds but only one student iteration to get the weights it saw
    ref = Discriminator(6)
    torch.manual_seed(0)
    np.random.seed(0)
    data2 = np.random.rand(48, 6)
    synth2 = PATECTGAN()
    synth2.student_iters = 1
    synth2.train(data2, rounds=1)
    # after iteration 1 the student weights are those the second iteration saw
    ref.load_state_dict(synth2.student_disc.state_dict())
    # synth2 also ran a generator step that does not touch student weights' values
    out = ref(x2)
    loss_ref = nn.BCELoss()(out, y2)
    g_alone = torch.autograd.grad(loss_ref, ref.seq[0].weight)[0]
    assert torch.allclose(g2, g1 + g_alone, atol=1e-6), "second-step grad should be stale+new"
    assert not torch.allclose(g2, g_alone, atol=1e-6)
    print("evidence holds: student discriminator grad at iteration 2 == grad(it1) + grad(it2): gradients accumulate without zero_grad")
