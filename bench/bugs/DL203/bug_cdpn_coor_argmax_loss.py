# source: https://github.com/LZGMatrix/BOP19_CDPN_2019ICCV/issues/4
# category: DL203
# expect: flag 65, 74
# evidence: the coordinate map fed to the loss is built from torch.argmax of the network's bins, so loss.backward() raises "element 0 of tensors does not require grad and does not have a grad_fn"
import torch
import torch.nn as nn

torch.manual_seed(0)


class cfg:
    class network:
        coor_bin = 8
        rot_output_channels = 3 * (8 + 1) + 1

    class train:
        begin_epoch = 0
        end_epoch = 1
        lr = 1e-4


class RotHeadNet(nn.Module):
    def __init__(self, in_channels, num_layers=2, num_filters=16, output_dim=cfg.network.rot_output_channels):
        super(RotHeadNet, self).__init__()
        layers = []
        for i in range(num_layers):
            layers += [nn.ConvTranspose2d(in_channels if i == 0 else num_filters, num_filters, 4, 2, 1),
                       nn.BatchNorm2d(num_filters), nn.ReLU(inplace=True)]
        self.features = nn.Sequential(*layers)
        self.out_layer = nn.Conv2d(num_filters, output_dim, kernel_size=1)

    def forward(self, x):
        return self.out_layer(self.features(x))


class CDPN(nn.Module):
    def __init__(self):
        super(CDPN, self).__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU())
        self.rot_head_net = RotHeadNet(32)

    def forward(self, x):
        features = self.backbone(x)
        cc_maps = self.rot_head_net(features)
        return cc_maps


def train(epoch, cfg, data_loader, model, criterion, optimizer):
    model.train()
    for i, (inp, target_coor) in enumerate(data_loader):
        pred = model(inp)
        coor_bin = cfg.network.coor_bin
        loss = 0
        for b in range(inp.size(0)):
            output_coor_x_ = pred[b, 0:coor_bin + 1]
            output_coor_y_ = pred[b, coor_bin + 1:2 * (coor_bin + 1)]
            output_coor_z_ = pred[b, 2 * (coor_bin + 1):3 * (coor_bin + 1)]

            output_coor_x_ = output_coor_x_.squeeze()
            output_coor_y_ = output_coor_y_.squeeze()
            output_coor_z_ = output_coor_z_.squeeze()

            ####

            output_coor_ = torch.stack([torch.argmax(output_coor_x_, axis=0),
                                        torch.argmax(output_coor_y_, axis=0),
                                        torch.argmax(output_coor_z_, axis=0)], axis=2)
            output_coor_[output_coor_ == cfg.network.coor_bin] = 0
            output_coor_ = 2.0 * output_coor_.float() / (63.0 - 1.0) - 1.0  # [-1,1]

            loss = loss + criterion(output_coor_, target_coor[b])

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print('Epoch {} iter {} loss {:.4f}'.format(epoch, i, loss.item()))


if __name__ == "__main__":
    model = CDPN()
    optimizer = torch.optim.RMSprop(model.parameters(), lr=cfg.train.lr)
    criterion = nn.L1Loss()
    data_loader = [(torch.rand(2, 3, 32, 32), torch.rand(2, 32, 32, 3) * 2 - 1) for _ in range(2)]
    try:
        for epoch in range(cfg.train.begin_epoch, cfg.train.end_epoch):
            train(epoch, cfg, data_loader, model, criterion, optimizer)
        err = None
    except RuntimeError as e:
        err = str(e)
    assert err is not None and "does not require grad and does not have a grad_fn" in err, err
    print("evidence holds: loss.backward() raised: " + err)
