import jax

# The solver tests compare against float64 references; float32 cases pass float32 arrays
# explicitly (shoal computes in the input's dtype either way).
jax.config.update("jax_enable_x64", True)
