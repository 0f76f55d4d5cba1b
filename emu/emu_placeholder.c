/* replaced by the emulator sources */
int mlxd_emu_placeholder(void);
int mlxd_emu_placeholder(void) { return 0; }
