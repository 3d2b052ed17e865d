/**
 * A require hook (`node -r ./test/support/block-modules.js …`) that makes the packages named in
 * $TWOPHASE_TEST_BLOCKED_MODULES (comma-separated, for example `kafkajs,pg`) fail to resolve, as
 * in a project that did not install them: `require('kafkajs')` (and `kafkajs/…`) throws Node's
 * own "Cannot find module 'kafkajs'" error (code MODULE_NOT_FOUND). Used by the CLI tests for
 * optional peer dependencies.
 */
const Module = require('node:module');

const blocked = (process.env.TWOPHASE_TEST_BLOCKED_MODULES ?? '')
  .split(',')
  .map((name) => name.trim())
  .filter((name) => name !== '');
const resolve = Module._resolveFilename;
Module._resolveFilename = function resolveUnlessBlocked(request, parent, ...rest) {
  if (blocked.some((name) => request === name || request.startsWith(`${name}/`))) {
    const error = new Error(`Cannot find module '${request}'\nRequire stack:\n- ${parent?.filename ?? '?'}`);
    error.code = 'MODULE_NOT_FOUND';
    error.requireStack = parent?.filename ? [parent.filename] : [];
    throw error;
  }
  return resolve.call(this, request, parent, ...rest);
};
