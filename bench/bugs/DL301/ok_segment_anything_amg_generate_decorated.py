# source: https://github.com/facebookresearch/segment-anything/blob/main/segment_anything/automatic_mask_generator.py
# category: DL301
# expect: clean
# evidence: the point-batch loop in _process_crop runs only inside the @torch.no_grad() generate() (and predict_torch is decorated too): no mask or IoU prediction carries a graph
from typing import Any, Dict, List

import numpy as np
import torch
from torch import nn


class Sam(nn.Module):
    mask_threshold: float = 0.0

    def __init__(self, embed_dim=8):
        super().__init__()
        self.image_encoder = nn.Sequential(nn.Conv2d(3, embed_dim, 4, stride=4), nn.GELU())
        self.prompt_encoder = nn.Linear(2, embed_dim)
        self.mask_decoder = nn.Linear(embed_dim, 3)
        self.iou_head = nn.Linear(embed_dim, 3)


class SamPredictor:
    def __init__(self, sam_model: Sam) -> None:
        self.model = sam_model
        self.reset_image()

    @torch.no_grad()
    def set_torch_image(self, transformed_image: torch.Tensor) -> None:
        self.reset_image()
        self.features = self.model.image_encoder(transformed_image)
        self.is_image_set = True

    @torch.no_grad()
    def predict_torch(self, point_coords, point_labels, multimask_output=True, return_logits=False):
        sparse_embeddings = self.model.prompt_encoder(point_coords.float()).mean(1)  # B x C
        image_embedding = self.features.flatten(2).mean(-1)  # 1 x C
        tokens = torch.tanh(sparse_embeddings + image_embedding)
        low_res_masks = self.model.mask_decoder(tokens)[:, :, None, None] * self.features[:, :1]  # B x 3 x h x w
        iou_predictions = torch.sigmoid(self.model.iou_head(tokens))
        masks = low_res_masks if return_logits else low_res_masks > self.model.mask_threshold
        return masks, iou_predictions, low_res_masks

    def reset_image(self) -> None:
        self.is_image_set = False
        self.features = None


def batch_iterator(batch_size: int, *args):
    n_batches = len(args[0]) // batch_size + int(len(args[0]) % batch_size != 0)
    for b in range(n_batches):
        yield [arg[b * batch_size: (b + 1) * batch_size] for arg in args]


def build_point_grid(n_per_side: int) -> np.ndarray:
    offset = 1 / (2 * n_per_side)
    points_one_side = np.linspace(offset, 1 - offset, n_per_side)
    points_x = np.tile(points_one_side[None, :], (n_per_side, 1))
    points_y = np.tile(points_one_side[:, None], (1, n_per_side))
    return np.stack([points_x, points_y], axis=-1).reshape(-1, 2)


class SamAutomaticMaskGenerator:
    def __init__(self, model: Sam, points_per_side: int = 4, points_per_batch: int = 6,
                 pred_iou_thresh: float = 0.0) -> None:
        self.predictor = SamPredictor(model)
        self.point_grid = build_point_grid(points_per_side)
        self.points_per_batch = points_per_batch
        self.pred_iou_thresh = pred_iou_thresh

    @torch.no_grad()
    def generate(self, image: np.ndarray) -> List[Dict[str, Any]]:
        orig_size = image.shape[:2]
        data = self._process_crop(image, [0, 0, orig_size[1], orig_size[0]], orig_size)
        return [{"segmentation": m, "predicted_iou": s} for m, s in zip(data["masks"], data["iou_preds"])]

    def _process_crop(self, image: np.ndarray, crop_box: List[int], orig_size) -> Dict[str, torch.Tensor]:
        x0, y0, x1, y1 = crop_box
        cropped_im = image[y0:y1, x0:x1, :]
        cropped_im_size = cropped_im.shape[:2]
        self.predictor.set_torch_image(torch.as_tensor(cropped_im).permute(2, 0, 1)[None].float())

        points_scale = np.array(cropped_im_size)[None, ::-1]
        points_for_image = self.point_grid * points_scale

        masks, iou_preds = [], []
        for (points,) in batch_iterator(self.points_per_batch, points_for_image):
            batch_data = self._process_batch(points)
            masks.append(batch_data["masks"])
            iou_preds.append(batch_data["iou_preds"])
            del batch_data
        self.predictor.reset_image()
        return {"masks": torch.cat(masks), "iou_preds": torch.cat(iou_preds)}

    def _process_batch(self, points: np.ndarray) -> Dict[str, torch.Tensor]:
        in_points = torch.as_tensor(points)
        in_labels = torch.ones(in_points.shape[0], dtype=torch.int)
        masks, iou_preds, _ = self.predictor.predict_torch(
            in_points[:, None, :], in_labels[:, None], multimask_output=True, return_logits=True)
        data = {"masks": masks.flatten(0, 1), "iou_preds": iou_preds.flatten(0, 1)}
        if self.pred_iou_thresh > 0.0:
            keep_mask = data["iou_preds"] > self.pred_iou_thresh
            data = {k: v[keep_mask] for k, v in data.items()}
        return data


if __name__ == "__main__":
    torch.manual_seed(0)
    sam = Sam()
    sam.eval()
    mask_generator = SamAutomaticMaskGenerator(sam, points_per_side=4, points_per_batch=6)
    image = np.random.RandomState(0).randint(0, 255, size=(16, 16, 3)).astype(np.uint8)
    anns = mask_generator.generate(image)
    assert len(anns) == 16 * 3
    assert all(a["segmentation"].grad_fn is None and not a["predicted_iou"].requires_grad for a in anns)
    assert torch.is_grad_enabled()
    print("evidence holds: %d masks generated, none carries a graph; grad mode restored afterwards" % len(anns))
