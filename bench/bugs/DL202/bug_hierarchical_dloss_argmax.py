# source: https://github.com/Ugenteraan/Deep_Hierarchical_Classification/issues/6
# category: DL202
# expect: flag 35, 36
# evidence: the dependence loss dloss is non-zero and added to total_loss, yet it carries no graph; the model's gradient from total_loss equals the gradient from lloss alone, so beta has no effect on training.
import torch
import torch.nn as nn

torch.manual_seed(0)


class HierarchicalLossNetwork:
    '''Logics to calculate the loss of the model.'''

    def __init__(self, numeric_hierarchy, device='cpu', total_level=2, alpha=1, beta=1, p_loss=5):
        self.total_level = total_level
        self.alpha = alpha
        self.beta = beta
        self.p_loss = p_loss
        self.device = device
        self.numeric_hierarchy = numeric_hierarchy

    def check_hierarchy(self, current_level, previous_level):
        bool_tensor = [current_level[i] in self.numeric_hierarchy[previous_level[i].item()] for i in range(previous_level.size()[0])]
        return torch.FloatTensor(bool_tensor).to(self.device)

    def calculate_lloss(self, predictions, true_labels):
        lloss = 0
        for l in range(self.total_level):
            lloss += nn.CrossEntropyLoss()(predictions[l], true_labels[l])
        return self.alpha * lloss

    def calculate_dloss(self, predictions, true_labels):
        dloss = 0
        for l in range(1, self.total_level):
            current_lvl_pred = torch.argmax(nn.Softmax(dim=1)(predictions[l]), dim=1)
            prev_lvl_pred = torch.argmax(nn.Softmax(dim=1)(predictions[l-1]), dim=1)
            D_l = self.check_hierarchy(current_lvl_pred, prev_lvl_pred)
            l_prev = torch.where(prev_lvl_pred == true_labels[l-1], 1.0, 0.)
            l_curr = torch.where(current_lvl_pred == true_labels[l], 1.0, 0.)
            dloss += torch.sum(-1*torch.pow(self.p_loss, D_l*l_prev)*torch.pow(self.p_loss, D_l*l_curr))
        return self.beta * dloss


class TwoHeadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(12, 16)
        self.linear_lvl1 = nn.Linear(16, 2)
        self.linear_lvl2 = nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.body(x))
        return self.linear_lvl1(h), self.linear_lvl2(h)


if __name__ == "__main__":
    hierarchy = {0: [0, 1], 1: [2, 3]}
    model = TwoHeadNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    HLN = HierarchicalLossNetwork(numeric_hierarchy=hierarchy, beta=1)

    batch_x = torch.randn(8, 12)
    batch_y2 = torch.randint(0, 4, (8,))
    batch_y1 = batch_y2 // 2
    optimizer.zero_grad()
    superclass_pred, subclass_pred = model(batch_x)
    prediction = [superclass_pred, subclass_pred]
    dloss = HLN.calculate_dloss(prediction, [batch_y1, batch_y2])
    lloss = HLN.calculate_lloss(prediction, [batch_y1, batch_y2])
    total_loss = lloss + dloss
    grad_lloss_only = torch.autograd.grad(lloss, model.body.weight, retain_graph=True)[0]
    total_loss.backward()
    optimizer.step()

    assert dloss.item() != 0 and not dloss.requires_grad
    assert torch.allclose(model.body.weight.grad, grad_lloss_only)
    print("evidence holds: dloss = %.2f has no graph; the gradient of total_loss equals that of lloss alone" % dloss.item())
