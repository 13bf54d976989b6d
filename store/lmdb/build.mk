# store/lmdb/build.mk - the LMDB backend's part of the Makefile.
#
# store/lmdb/ is the one place of agentkit that includes lmdb.h (the
# Makefile's DEP_LIBS links liblmdb; its objects need no flags of their
# own).
# lint: owns <lmdb.h>
