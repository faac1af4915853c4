#include <criterion/criterion.h>
Test(escape, placeholder) {}
