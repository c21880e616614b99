"""The losses are sentence-transformers' losses: on the library's contract exactly (``loss(sentence_features,
labels)``; a cross-encoder's ``loss(inputs, labels)``), each usable by a sentence-transformers user with the
library's own trainer and no pldistill code around it; and the Trainer's arguments our params map onto."""

import pytest
import torch

from pldistill.params.config import parse_params
from pldistill.train.losses.cosine_mse import CosineMSELoss
from pldistill.train.losses.soft_bce import SoftBCELoss
from tests.conftest import make_pairs


def test_a_sentence_transformers_user_trains_with_our_loss_and_the_library_trainer_alone(tiny_model_dir, tmp_path):
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers import SentenceTransformerTrainingArguments as Args

    torch.manual_seed(0)
    model = SentenceTransformer(str(tiny_model_dir), device="cpu")
    pairs = make_pairs(32)
    data = Dataset.from_pandas(pairs)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = Args(output_dir=str(tmp_path), num_train_epochs=1, per_device_train_batch_size=8, report_to="none",
                use_cpu=True, save_strategy="no", disable_tqdm=True)
    out = SentenceTransformerTrainer(model=model, args=args, train_dataset=data, loss=CosineMSELoss(model)).train()
    assert out.global_step == 4 and out.training_loss > 0
    assert any(not torch.equal(v, model.state_dict()[k]) for k, v in before.items())


def test_a_pair_batch_is_one_forward_and_each_row_embeds_as_alone(tiny_model_dir):
    """The columns of a pair batch go through the model in one forward (the collator's features joined, padded on
    the right); a row's embedding is what a forward of its own column gives, and a left-padding tokenizer or
    features that do not stack fall back to one forward a column."""
    from sentence_transformers import SentenceTransformer

    from pldistill.train.losses.base import embeddings, joined

    model = SentenceTransformer(str(tiny_model_dir), device="cpu").eval()
    pairs = make_pairs(6)
    longer = list(pairs.sentence2[:4]) + ["a much longer sentence " * 5] * 2
    features = [model.tokenize(list(pairs.sentence1)), model.tokenize(longer)]
    assert features[0]["input_ids"].shape[1] != features[1]["input_ids"].shape[1]
    calls = []
    model.register_forward_pre_hook(lambda *_: calls.append(1))
    with torch.no_grad():
        u, v = embeddings(model, features, 2, "a test")
        assert len(calls) == 1 and u.shape == v.shape == (6, model.get_sentence_embedding_dimension())
        alone = [model(f)["sentence_embedding"] for f in features]
    torch.testing.assert_close(u, alone[0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(v, alone[1], atol=1e-5, rtol=1e-4)
    assert joined(model, [features[0], {**features[1], "modality": "image"}]) is None
    model.tokenizer.padding_side = "left"
    assert joined(model, features) is None


def test_a_cross_encoder_user_trains_with_our_soft_bce_and_the_library_trainer_alone(tiny_model_dir, tmp_path):
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoder, CrossEncoderTrainer
    from sentence_transformers.cross_encoder import CrossEncoderTrainingArguments as Args

    torch.manual_seed(0)
    model = CrossEncoder(str(tiny_model_dir), num_labels=1, device="cpu")
    data = Dataset.from_pandas(make_pairs(16))
    args = Args(output_dir=str(tmp_path), num_train_epochs=1, per_device_train_batch_size=8, report_to="none",
                use_cpu=True, save_strategy="no", disable_tqdm=True)
    out = CrossEncoderTrainer(model=model, args=args, train_dataset=data, loss=SoftBCELoss(model)).train()
    assert out.global_step == 2 and out.training_loss > 0


def test_the_trainer_arguments_our_params_map_onto_on_a_cpu_and_on_cuda(tmp_path):
    """On CUDA: the Trainer's own bf16 and fused AdamW, DDP over nccl for several processes; on a CPU: gloo.
    Built as a dict, so a machine without a GPU checks what one would get."""
    from pldistill.train.trainer_parts import arguments

    p = parse_params({"student": {"batch_size": 32, "accumulate": 2, "lr": 3e-5, "warmup": 0.1, "epochs": 3,
                                  "optimizer": "adamw-fused"}}).student
    gpu = arguments(p, tmp_path, 7, "bf16", 8, cuda=True, world=2)
    assert gpu["bf16"] and not gpu["fp16"] and not gpu["use_cpu"] and gpu["optim"] == "adamw_torch_fused"
    assert gpu["ddp_backend"] == "nccl" and gpu["per_device_train_batch_size"] == 8
    assert (gpu["gradient_accumulation_steps"], gpu["learning_rate"], gpu["warmup_steps"]) == (2, 3e-5, 0.1)
    assert (gpu["num_train_epochs"], gpu["seed"], gpu["max_grad_norm"], gpu["lr_scheduler_type"]) == (3, 7, 1.0,
                                                                                                      "linear")
    cpu = arguments(p, tmp_path, 7, "fp32", 16, cuda=False, world=2)
    assert cpu["use_cpu"] and not cpu["bf16"] and cpu["ddp_backend"] == "gloo"
    assert "ddp_backend" not in arguments(p, tmp_path, 7, "fp32", 16, cuda=False)  # one process: no group
    fp16 = arguments(p, tmp_path, 7, "fp16", 8, cuda=True)
    assert fp16["fp16"] and not fp16["bf16"]


def test_an_old_params_file_naming_the_gone_engine_is_told_what_to_do():
    from pldistill.base.errors import ConfigError

    with pytest.raises(ConfigError, match="train.trainer: no longer a key: every training runs on sentence-"
                                          "transformers' trainers now; delete the key"):
        parse_params({"train": {"trainer": "ours"}})
