# source: https://github.com/knazeri/edge-connect/issues/9
# category: DL301
# expect: flag 131, 138
# evidence: EdgeConnect.eval() runs edge_model.process on every validation batch with autograd on and never calls backward, so outputs and gen_loss keep their graphs.
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset


class Progbar:
    def __init__(self, target, width=20, stateful_metrics=None):
        self.target = target
        self.seen = 0

    def add(self, n, values=None):
        self.seen += n


class EdgeAccuracy(nn.Module):
    def __init__(self, threshold=0.5):
        super().__init__()
        self.threshold = threshold

    def forward(self, inputs, outputs):
        labels = (inputs > self.threshold)
        outputs = (outputs > self.threshold)
        relevant = torch.sum(labels.float())
        selected = torch.sum(outputs.float())
        true_positive = ((outputs == labels) * labels).float()
        recall = torch.sum(true_positive) / (relevant + 1e-8)
        precision = torch.sum(true_positive) / (selected + 1e-8)
        return precision, recall


class EdgeGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))

    def forward(self, x):
        return torch.sigmoid(self.net(x))


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 8, 3, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3, padding=1))

    def forward(self, x):
        return self.net(x), []


class EdgeModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.generator = EdgeGenerator()
        self.discriminator = Discriminator()
        self.l1_loss = nn.L1Loss()
        self.adversarial_loss = nn.BCEWithLogitsLoss()
        self.gen_optimizer = torch.optim.Adam(self.generator.parameters(), lr=1e-4)
        self.dis_optimizer = torch.optim.Adam(self.discriminator.parameters(), lr=1e-5)
        self.iteration = 0

    def forward(self, images, edges, masks):
        edges_masked = (edges * (1 - masks))
        images_masked = (images * (1 - masks)) + masks
        inputs = torch.cat((images_masked, edges_masked, masks), dim=1)
        outputs = self.generator(inputs)
        return outputs

    def process(self, images, edges, masks):
        self.iteration += 1
        self.gen_optimizer.zero_grad()
        self.dis_optimizer.zero_grad()

        outputs = self(images, edges, masks)
        gen_loss = 0
        dis_loss = 0

        dis_input_real = torch.cat((images, edges), dim=1)
        dis_input_fake = torch.cat((images, outputs.detach()), dim=1)
        dis_real, _ = self.discriminator(dis_input_real)
        dis_fake, _ = self.discriminator(dis_input_fake)
        dis_real_loss = self.adversarial_loss(dis_real, torch.ones_like(dis_real))
        dis_fake_loss = self.adversarial_loss(dis_fake, torch.zeros_like(dis_fake))
        dis_loss += (dis_real_loss + dis_fake_loss) / 2

        gen_input_fake = torch.cat((images, outputs), dim=1)
        gen_fake, _ = self.discriminator(gen_input_fake)
        gen_gan_loss = self.adversarial_loss(gen_fake, torch.ones_like(gen_fake))
        gen_loss += gen_gan_loss

        logs = [
            ("l_d1", dis_loss.item()),
            ("l_g1", gen_gan_loss.item()),
        ]
        return outputs, gen_loss, dis_loss, logs


class Config:
    BATCH_SIZE = 2
    MODEL = 1


class EdgeConnect():
    def __init__(self, config, val_dataset):
        self.config = config
        self.edge_model = EdgeModel()
        self.edgeacc = EdgeAccuracy(0.5)
        self.val_dataset = val_dataset

    def cuda(self, *args):
        return (item for item in args)

    def eval(self):
        val_loader = DataLoader(
            dataset=self.val_dataset,
            batch_size=self.config.BATCH_SIZE,
            drop_last=True,
            shuffle=True
        )

        model = self.config.MODEL
        total = len(self.val_dataset)

        self.edge_model.eval()

        progbar = Progbar(total, width=20, stateful_metrics=['it'])
        iteration = 0

        for items in val_loader:
            iteration += 1
            images, images_gray, edges, masks = self.cuda(*items)

            # edge model
            if model == 1:
                # eval
                outputs, gen_loss, dis_loss, logs = self.edge_model.process(images_gray, edges, masks)

                # metrics
                precision, recall = self.edgeacc(edges * masks, outputs * masks)
                logs.append(('precision', precision.item()))
                logs.append(('recall', recall.item()))

            logs = [("it", iteration), ] + logs
            progbar.add(len(images), values=logs)


if __name__ == "__main__":
    torch.manual_seed(0)
    n = 6
    images = torch.rand(n, 3, 8, 8)
    images_gray = torch.rand(n, 1, 8, 8)
    edges = (torch.rand(n, 1, 8, 8) > 0.7).float()
    masks = (torch.rand(n, 1, 8, 8) > 0.5).float()
    val_dataset = TensorDataset(images, images_gray, edges, masks)

    edge_connect = EdgeConnect(Config(), val_dataset)

    kept = []
    original_process = edge_connect.edge_model.process

    def recording_process(*a):
        result = original_process(*a)
        outputs, gen_loss, dis_loss, _ = result
        kept.append((outputs.grad_fn is not None, gen_loss.grad_fn is not None, dis_loss.grad_fn is not None))
        return result

    edge_connect.edge_model.process = recording_process
    edge_connect.eval()

    assert len(kept) == 3
    assert kept == [(True, True, True)] * 3
    assert all(p.grad is None for p in edge_connect.edge_model.parameters())
    print("evidence holds: every eval() batch built a graph (outputs/gen_loss/dis_loss have grad_fn) and no gradient was ever computed")
