"""What is served: the exports (export), an export run as served (served), and speed ratios and latency (speed). It may
import base, params and models. Nothing is imported here."""
