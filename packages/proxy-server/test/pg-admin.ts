/** One statement on a PostgreSQL database (CREATE DATABASE for the test harness). */
import postgres from 'postgres';

export async function adminSql(url: string, statement: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => undefined });
  try {
    await sql.unsafe(statement);
  } finally {
    await sql.end();
  }
}

let made = 0;

/** A new database on the cluster whose maintenance database is `adminUrl`; its URL. */
export async function createTestDatabase(adminUrl: string): Promise<string> {
  const db = `w_${process.pid}_${++made}_${Math.random().toString(36).slice(2, 8)}`;
  await adminSql(adminUrl, `CREATE DATABASE ${db}`);
  return adminUrl.replace(/\/[^/]*$/, `/${db}`);
}
