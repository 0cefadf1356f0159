# source: https://github.com/thuml/predrnn-pytorch/issues/11
# category: DL201
# expect: flag 114
# evidence: after several Model.train() iterations the shared adapter conv (used only by the decoupling loss) has grad None and identical weights, while the ST-LSTM cells change.
__author__ = 'yunbo'
# core/models/predrnn_memory_decoupling.py, core/layers/SpatioTemporalLSTMCell_memory_decoupling.py,
# core/models/model_factory.py and core/trainer.py.train, with tiny configs.
import argparse
import datetime

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import Adam


class SpatioTemporalLSTMCell(nn.Module):
    def __init__(self, in_channel, num_hidden, width, filter_size, stride, layer_norm):
        super(SpatioTemporalLSTMCell, self).__init__()
        self.num_hidden = num_hidden
        self.padding = filter_size // 2
        self._forget_bias = 1.0
        self.conv_x = nn.Sequential(nn.Conv2d(in_channel, num_hidden * 7, kernel_size=filter_size, stride=stride,
                                              padding=self.padding, bias=False))
        self.conv_h = nn.Sequential(nn.Conv2d(num_hidden, num_hidden * 4, kernel_size=filter_size, stride=stride,
                                              padding=self.padding, bias=False))
        self.conv_m = nn.Sequential(nn.Conv2d(num_hidden, num_hidden * 3, kernel_size=filter_size, stride=stride,
                                              padding=self.padding, bias=False))
        self.conv_o = nn.Sequential(nn.Conv2d(num_hidden * 2, num_hidden, kernel_size=filter_size, stride=stride,
                                              padding=self.padding, bias=False))
        self.conv_last = nn.Conv2d(num_hidden * 2, num_hidden, kernel_size=1, stride=1, padding=0, bias=False)

    def forward(self, x_t, h_t, c_t, m_t):
        x_concat = self.conv_x(x_t)
        h_concat = self.conv_h(h_t)
        m_concat = self.conv_m(m_t)
        i_x, f_x, g_x, i_x_prime, f_x_prime, g_x_prime, o_x = torch.split(x_concat, self.num_hidden, dim=1)
        i_h, f_h, g_h, o_h = torch.split(h_concat, self.num_hidden, dim=1)
        i_m, f_m, g_m = torch.split(m_concat, self.num_hidden, dim=1)
        i_t = torch.sigmoid(i_x + i_h)
        f_t = torch.sigmoid(f_x + f_h + self._forget_bias)
        g_t = torch.tanh(g_x + g_h)
        delta_c = i_t * g_t
        c_new = f_t * c_t + delta_c
        i_t_prime = torch.sigmoid(i_x_prime + i_m)
        f_t_prime = torch.sigmoid(f_x_prime + f_m + self._forget_bias)
        g_t_prime = torch.tanh(g_x_prime + g_m)
        delta_m = i_t_prime * g_t_prime
        m_new = f_t_prime * m_t + delta_m
        mem = torch.cat((c_new, m_new), 1)
        o_t = torch.sigmoid(o_x + o_h + self.conv_o(mem))
        h_new = o_t * torch.tanh(self.conv_last(mem))
        return h_new, c_new, m_new, delta_c, delta_m


class RNN(nn.Module):
    def __init__(self, num_layers, num_hidden, configs):
        super(RNN, self).__init__()
        self.configs = configs
        self.frame_channel = configs.patch_size * configs.patch_size
        self.num_layers = num_layers
        self.num_hidden = num_hidden
        cell_list = []
        width = configs.img_width // configs.patch_size
        self.MSE_criterion = nn.MSELoss()
        for i in range(num_layers):
            in_channel = self.frame_channel if i == 0 else num_hidden[i - 1]
            cell_list.append(SpatioTemporalLSTMCell(in_channel, num_hidden[i], width, configs.filter_size,
                                                    configs.stride, configs.layer_norm))
        self.cell_list = nn.ModuleList(cell_list)
        self.conv_last = nn.Conv2d(num_hidden[num_layers - 1], self.frame_channel, kernel_size=1, stride=1,
                                   padding=0, bias=False)
        # shared adapter
        adapter_num_hidden = num_hidden[0]
        self.adapter = nn.Conv2d(adapter_num_hidden, adapter_num_hidden, 1, stride=1, padding=0, bias=False)

    def forward(self, frames_tensor, mask_true):
        # [batch, length, height, width, channel] -> [batch, length, channel, height, width]
        frames = frames_tensor.permute(0, 1, 4, 2, 3).contiguous()
        mask_true = mask_true.permute(0, 1, 4, 2, 3).contiguous()
        batch, height, width = frames.shape[0], frames.shape[3], frames.shape[4]
        next_frames, h_t, c_t, delta_c_list, delta_m_list = [], [], [], [], []
        decouple_loss = []
        for i in range(self.num_layers):
            zeros = torch.zeros([batch, self.num_hidden[i], height, width]).to(self.configs.device)
            h_t.append(zeros)
            c_t.append(zeros)
            delta_c_list.append(zeros)
            delta_m_list.append(zeros)
        memory = torch.zeros([batch, self.num_hidden[0], height, width]).to(self.configs.device)

        for t in range(self.configs.total_length - 1):
            # schedule sampling
            if t < self.configs.input_length:
                net = frames[:, t]
            else:
                net = mask_true[:, t - self.configs.input_length] * frames[:, t] + \
                      (1 - mask_true[:, t - self.configs.input_length]) * x_gen
            h_t[0], c_t[0], memory, delta_c, delta_m = self.cell_list[0](net, h_t[0], c_t[0], memory)
            delta_c_list[0] = F.normalize(self.adapter(delta_c).view(delta_c.shape[0], delta_c.shape[1], -1), dim=2)
            delta_m_list[0] = F.normalize(self.adapter(delta_m).view(delta_m.shape[0], delta_m.shape[1], -1), dim=2)
            for i in range(1, self.num_layers):
                h_t[i], c_t[i], memory, delta_c, delta_m = self.cell_list[i](h_t[i - 1], h_t[i], c_t[i], memory)
                delta_c_list[i] = F.normalize(self.adapter(delta_c).view(delta_c.shape[0], delta_c.shape[1], -1), dim=2)
                delta_m_list[i] = F.normalize(self.adapter(delta_m).view(delta_m.shape[0], delta_m.shape[1], -1), dim=2)
            x_gen = self.conv_last(h_t[self.num_layers - 1])
            next_frames.append(x_gen)
            # decoupling loss
            for i in range(0, self.num_layers):
                decouple_loss.append(
                    torch.mean(torch.abs(torch.cosine_similarity(delta_c_list[i], delta_m_list[i], dim=2))))

        decouple_loss = torch.mean(torch.tensor(decouple_loss).to(self.configs.device))
        # [length, batch, channel, height, width] -> [batch, length, height, width, channel]
        next_frames = torch.stack(next_frames, dim=0).permute(1, 0, 3, 4, 2).contiguous()
        loss = self.MSE_criterion(next_frames, frames_tensor[:, 1:]) + self.configs.decouple_beta * decouple_loss
        return next_frames, loss


class Model(object):
    def __init__(self, configs):
        self.configs = configs
        self.num_hidden = [int(x) for x in configs.num_hidden.split(',')]
        self.num_layers = len(self.num_hidden)
        networks_map = {'predrnn_memory_decoupling': RNN}
        Network = networks_map[configs.model_name]
        self.network = Network(self.num_layers, self.num_hidden, configs).to(configs.device)
        self.optimizer = Adam(self.network.parameters(), lr=configs.lr)

    def train(self, frames, mask):
        frames_tensor = torch.FloatTensor(frames).to(self.configs.device)
        mask_tensor = torch.FloatTensor(mask).to(self.configs.device)
        self.optimizer.zero_grad()
        next_frames, loss = self.network(frames_tensor, mask_tensor)
        loss.backward()
        self.optimizer.step()
        return loss.detach().cpu().numpy()


def train(model, ims, real_input_flag, configs, itr):
    cost = model.train(ims, real_input_flag)
    if itr % configs.display_interval == 0:
        print(datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S'), 'itr: ' + str(itr))
        print('training loss: ' + str(cost))


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    configs = argparse.Namespace(model_name='predrnn_memory_decoupling', num_hidden='8,8', patch_size=2,
                                 img_width=8, img_channel=1, filter_size=3, stride=1, layer_norm=0,
                                 total_length=5, input_length=3, device='cpu', lr=1e-3, decouple_beta=0.1,
                                 display_interval=2)
    model = Model(configs)
    adapter_before = model.network.adapter.weight.detach().clone()
    cell_before = model.network.cell_list[0].conv_x[0].weight.detach().clone()
    width = configs.img_width // configs.patch_size
    for itr in range(1, 4):
        ims = np.random.rand(2, configs.total_length, width, width, configs.patch_size ** 2)
        real_input_flag = np.zeros((2, configs.total_length - configs.input_length - 1, width, width,
                                    configs.patch_size ** 2))
        train(model, ims, real_input_flag, configs, itr)

    assert model.network.adapter.weight.grad is None
    assert model.network.cell_list[0].conv_x[0].weight.grad is not None
    with torch.no_grad():
        assert torch.equal(adapter_before, model.network.adapter.weight)
        assert not torch.equal(cell_before, model.network.cell_list[0].conv_x[0].weight)
    print("evidence holds: the decoupling adapter never gets a gradient and never changes; the cells do")
