// SPDX-License-Identifier: GPL-2.0
/*
 * mwdummy: a do-nothing module for the VM bench's own selftest. Writing 1
 * to its "leak" parameter takes a module reference that is never dropped,
 * so the test can check that the bench reports the failing rmmod.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>

static int mwdummy_leak_set(const char *val, const struct kernel_param *kp)
{
	bool leak;
	int ret = kstrtobool(val, &leak);

	if (ret)
		return ret;
	if (leak)
		__module_get(THIS_MODULE);
	return 0;
}

static const struct kernel_param_ops mwdummy_leak_ops = {
	.set = mwdummy_leak_set,
};

module_param_cb(leak, &mwdummy_leak_ops, NULL, 0200);
MODULE_PARM_DESC(leak, "write 1 to leak one module reference (selftest)");

static int __init mwdummy_init(void)
{
	return 0;
}

static void __exit mwdummy_exit(void)
{
}

module_init(mwdummy_init);
module_exit(mwdummy_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("mmuwatch VM bench selftest dummy");
