"""The data: tables read (reading), rows cleaned and split (rows), the public sets (public_sets), data.dataset loaded
and checked (datasets), round-trip translation (rtt), and the sentences stage embed learns with their variants
(sentences, variants). It may import base and params. Nothing is imported here."""
