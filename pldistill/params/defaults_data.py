"""The defaults of seed, data and adapt (the sections stage download reads), as params.yaml holds them: generated from
params.yaml by `python scripts/params_doc.py`. Do not edit it: params.yaml is the one place a default lives, and
tests/test_params_yaml.py fails when this file drifts from it."""

DEFAULTS = {
    'seed': 42,
    'data': {
        'dataset': 'demo',
        'source': None,
        'task': None,
        'columns': {},
        'score_range': None,
        'split': {'dev': 0.1, 'test': 0.1},
        'split_by': 'pair',
        'max_train': None,
        'unscored': None,
        'max_drop_share': 0.05,
    },
    'adapt': {
        'dataset': None,
        'source': None,
        'task': None,
        'columns': {},
        'score_range': None,
        'split': {'dev': 0.1, 'test': 0.1},
        'split_by': 'pair',
        'max_train': None,
        'max_drop_share': 0.05,
        'unscored': None,
    },
}
