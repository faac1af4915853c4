# version.cmake: writes OUT (moat/version.h) from IN with PROJECT_VERSION and, in a git checkout
# (SRC/.git), `git describe`. Run at configure time and again at every build (the moat_version
# target), so a binary never names a commit it was not built from (a benchmark's report quotes
# it); configure_file rewrites OUT only when its text changes, so nothing rebuilds for nothing.
# In: IN, OUT, SRC, PROJECT_VERSION, GIT_EXECUTABLE (may be empty).
set(MOAT_VERSION_FULL "${PROJECT_VERSION}")
# --dirty refreshes the index: without the optional lock, a commit made during a build never
# meets ours.
set(ENV{GIT_OPTIONAL_LOCKS} 0)
if(GIT_EXECUTABLE AND EXISTS "${SRC}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --dirty
    WORKING_DIRECTORY "${SRC}" OUTPUT_VARIABLE MOAT_GIT_DESCRIBE
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE MOAT_GIT_RC)
  if(MOAT_GIT_RC EQUAL 0 AND MOAT_GIT_DESCRIBE)
    set(MOAT_VERSION_FULL "${PROJECT_VERSION} (git ${MOAT_GIT_DESCRIBE})")
  endif()
endif()
configure_file("${IN}" "${OUT}" @ONLY)
