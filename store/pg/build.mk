# store/pg/build.mk - the PostgreSQL backend's part of the Makefile.
#
# store/pg/ is the one place of agentkit that includes libpq-fe.h (the
# PostgreSQL benchmark's baseline is the other): its objects get libpq's
# include flags.  libpq is not linked: store/pg/pq.c loads it when a
# PostgreSQL store is opened, so that no other run pays for its 22
# libraries (pq.h).  Only the PostgreSQL benchmark's baseline program
# links it (PQ_LIBS).
# lint: owns <libpq-fe.h>
PQ_CFLAGS := $(shell pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql)
PQ_LIBS   := $(shell pkg-config --libs libpq 2>/dev/null || echo -lpq)
$(BUILD)/store/pg/%.o: OBJ_CFLAGS = $(PQ_CFLAGS)
