import type { PrismaClient } from "../../db/database.ts";
import type { CheckoutBrand } from "../../checkout/page.ts";

/**
 * The merchant's brand on its payers' pages (checkout, payment links). Until the merchant sets one, its name
 * and the page's defaults. (Issue 25: brand settings are stored and edited here.)
 */
export function createBrandService(prisma: PrismaClient) {
  return {
    async checkoutBrand(merchantId: number): Promise<CheckoutBrand> {
      const merchant = await prisma.merchant.findUnique({ where: { id: merchantId }, select: { name: true } });
      return { displayName: merchant?.name ?? "", accentColor: null, logoUrl: null, supportEmail: null };
    },
  };
}

export type BrandService = ReturnType<typeof createBrandService>;
