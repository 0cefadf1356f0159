# source: https://github.com/nyukat/breast_cancer_classifier/issues/56
# category: DL201
# expect: flag 62, 94
# evidence: compute_batch_predictions turns the model output into numpy and run_model re-wraps the averaged numbers with torch.tensor(..., requires_grad=True); l.backward() runs but every SplitBreastModel parameter keeps grad None and optimizer.step() changes nothing
import collections as col

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
np.random.seed(0)


class VIEWS:
    L_CC = "L-CC"
    R_CC = "R-CC"
    L_MLO = "L-MLO"
    R_MLO = "R-MLO"
    LIST = [L_CC, R_CC, L_MLO, R_MLO]


class VIEWANGLES:
    CC = "CC"
    MLO = "MLO"
    LIST = [CC, MLO]


class LABELS:
    BENIGN = "benign"
    MALIGNANT = "malignant"
    LIST = [BENIGN, MALIGNANT]


class SplitBreastModel(nn.Module):
    """Tiny stand-in: one shared column per view angle, two binary heads (benign, malignant)."""

    def __init__(self, input_channels):
        super(SplitBreastModel, self).__init__()
        self.four_view_resnet = nn.Sequential(
            nn.Conv2d(input_channels, 4, 3, 2, 1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.cc_output_layer = nn.Linear(8, len(LABELS.LIST) * 2)
        self.mlo_output_layer = nn.Linear(8, len(LABELS.LIST) * 2)

    def forward(self, x):
        h = {view: self.four_view_resnet(x[view]) for view in VIEWS.LIST}
        h_cc = torch.cat([h[VIEWS.L_CC], h[VIEWS.R_CC]], dim=1)
        h_mlo = torch.cat([h[VIEWS.L_MLO], h[VIEWS.R_MLO]], dim=1)
        y_cc = F.log_softmax(self.cc_output_layer(h_cc).view(-1, len(LABELS.LIST), 2), dim=-1)
        y_mlo = F.log_softmax(self.mlo_output_layer(h_mlo).view(-1, len(LABELS.LIST), 2), dim=-1)
        return {VIEWANGLES.CC: y_cc, VIEWANGLES.MLO: y_mlo}


def compute_batch_predictions(y_hat):
    """
    Format predictions from different heads
    """
    batch_prediction_dict = col.OrderedDict([
        ((label_name, view_angle),
         np.exp(y_hat[view_angle][:, i].cpu().detach().numpy()))
        for i, label_name in enumerate(LABELS.LIST)
        for view_angle in VIEWANGLES.LIST
    ])
    return batch_prediction_dict


def run_model(model, exam_list, parameters, optimizer, loss):
    """
    Returns predictions of image only model, trained on the fly as proposed in the issue.
    Prediction for each exam is averaged over the view angles.
    """
    device = torch.device("cpu")
    model = model.to(device)
    model.train()

    losses = []
    for datum in exam_list:
        tensor_batch = {
            view: torch.tensor(np.stack(datum[view])).permute(0, 3, 1, 2).to(device)
            for view in VIEWS.LIST
        }
        output = model(tensor_batch)
        batch_predictions = compute_batch_predictions(output)
        # pandas groupby("label").mean() over the view angles, written with numpy
        predictions = np.stack([
            np.mean([batch_predictions[(label, view_angle)][:, 1] for view_angle in VIEWANGLES.LIST], axis=0)
            for label in LABELS.LIST
        ], axis=1)

        gt = np.transpose(np.array(datum["birads_labels"]).reshape(predictions.shape[1], 1))
        gt = torch.tensor(gt, dtype=torch.float, requires_grad=True)
        predictions = torch.tensor(predictions, requires_grad=True)
        l = loss(predictions, gt)
        optimizer.zero_grad()
        l.backward()
        optimizer.step()
        losses.append(l.item())
    return losses, predictions


if __name__ == "__main__":
    model = SplitBreastModel(input_channels=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss = nn.BCELoss()
    exam_list = []
    for _ in range(3):
        datum = {view: [np.random.rand(32, 32, 1).astype(np.float32)] for view in VIEWS.LIST}
        datum["birads_labels"] = [0, 1]
        exam_list.append(datum)

    before = [p.detach().clone() for p in model.parameters()]
    losses, predictions = run_model(model, exam_list, {"device_type": "cpu"}, optimizer, loss)
    assert predictions.grad is not None
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))
    print("evidence holds: backward ran (losses %s) but all %d model parameters have grad None and are unchanged"
          % ([round(v, 3) for v in losses], len(before)))
