"""The student's start: the layers a pruned student keeps (cut), a static student's start and its choice (static,
static_choice), its learned token weights (token_weights), and stage embed's embedding distillation (embedding). It
may import every package but ship and recipes. Nothing is imported here."""
