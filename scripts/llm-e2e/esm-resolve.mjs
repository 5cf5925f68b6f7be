// @botpress/zai 2.6.21 ships ES modules with extensionless relative
// imports ('./zai'), written for the bundler of `bp build` (esbuild), which
// Node's own loader refuses. A bot gets zai bundled; this test loads it as
// is, so it lets Node resolve such imports the bundler's way: './x' is
// './x.js' or './x/index.js'. Used with node --import (run.sh).
import { register } from 'node:module'

register('data:text/javascript,' + encodeURIComponent(`
export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context)
  } catch (err) {
    const relative = specifier.startsWith('./') || specifier.startsWith('../')
    if (!relative || !['ERR_MODULE_NOT_FOUND', 'ERR_UNSUPPORTED_DIR_IMPORT'].includes(err.code)) throw err
    for (const candidate of [specifier + '.js', specifier + '/index.js']) {
      try {
        return await next(candidate, context)
      } catch {}
    }
    throw err
  }
}`))
